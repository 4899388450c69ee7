"""kgserve.admission.clients' connections (issue 40): a budget from the file-descriptor limit, the per-address cap
engaged only in its last share, and a burst of connections over giving its memory back."""

from __future__ import annotations

from kgserve.admission.clients import DRAINED_AFTER, ClientTable, connection_budget


def test_the_budget_comes_from_the_descriptor_limit_less_what_is_kept() -> None:
    assert connection_budget(20_000) == 18_750 and connection_budget(1024) == 960 and connection_budget(100) == 36
    assert connection_budget() > 0


def test_an_address_passes_its_cap_until_the_last_share_which_is_kept_for_newcomers() -> None:
    table = ClientTable(2, budget=16)  # 14 open to anyone, the last 2 for addresses under their cap of 2
    assert all(table.connect("a") is None for _ in range(14))
    assert table.connect("a") == "client_connections" and "limits.max_connections_per_client" in table.refusal_text(
        "client_connections"
    )
    assert table.connect("b") is None and table.connect("b") is None  # a newcomer: the share kept for it
    assert table.connect("c") == "server_connections" and table.total == 16
    table.disconnect("a")
    assert table.connect("c") is None and table.connections == {"a": 13, "b": 2, "c": 1}


def test_a_burst_of_connections_over_calls_on_drained_once() -> None:
    # issue 40: one address may hold a burst of connections; when it has gone, their buffers go back (trim_malloc)
    table = ClientTable(64, budget=4096)
    drained: list[int] = []
    table.on_drained = lambda: drained.append(table.total)
    table.connect("127.0.0.9")  # a client that stays
    for _ in range(DRAINED_AFTER):
        assert table.connect("127.0.1.1") is None
    for _ in range(DRAINED_AFTER):
        table.disconnect("127.0.1.1")
    assert drained == [DRAINED_AFTER // 16] and table.total == 1
    for _ in range(10):  # small traffic after: no call
        table.connect("127.0.1.2")
        table.disconnect("127.0.1.2")
    assert len(drained) == 1
