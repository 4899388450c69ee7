"""kgserve.forwarded as a plain ASGI layer (no server): what it does to a trusted proxy's requests, that it never
reads an untrusted peer's headers, its per-client count, its refusals, and its rate-limited warning."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from kgserve.admission.clients import ClientTable
from kgserve.admission.proxies import TrustedProxies
from kgserve.forwarded import ForwardedClients
from kgserve.metrics import Metrics


class Untouchable(list[tuple[bytes, bytes]]):
    def __iter__(self) -> Any:
        raise AssertionError("an untrusted peer's headers were read")


class Recorder:
    def __init__(self, fail: bool = False) -> None:
        self.scopes: list[dict[str, Any]] = []
        self.counts: list[dict[str, int]] = []
        self.fail = fail
        self.table: ClientTable | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.scopes.append(scope)
        assert self.table is not None
        self.counts.append(dict(self.table.connections))
        if self.fail:
            raise RuntimeError("the app failed")


def layer(app: Recorder, max_connections: int = 2, budget: int = 0) -> tuple[ForwardedClients, ClientTable, Metrics]:
    table = ClientTable(max_connections, budget=budget)
    app.table = table
    metrics = Metrics(status=lambda: None, inflight=lambda: 0)
    proxies = TrustedProxies(["10.0.0.0/8"])
    return ForwardedClients(app, proxies=proxies, clients=table, metrics=metrics), table, metrics


def scope(peer: str, *values: bytes, kind: str = "http", **extra: Any) -> dict[str, Any]:
    return {"type": kind, "client": (peer, 5555), "headers": [(b"x-forwarded-for", v) for v in values], **extra}


async def nothing() -> dict[str, Any]:
    return {"type": "http.request"}


async def test_an_untrusted_peer_passes_untouched_and_unread() -> None:
    app = Recorder()
    forwarded, table, _ = layer(app)
    untrusted = {"type": "http", "client": ("192.0.2.1", 5555), "headers": Untouchable()}
    await forwarded(untrusted, nothing, _no_send)
    assert app.scopes[0]["client"] == ("192.0.2.1", 5555) and "state" not in app.scopes[0]
    await forwarded({"type": "lifespan"}, nothing, _no_send)
    assert len(app.scopes) == 2 and table.connections == {}


async def test_a_trusted_peers_request_is_its_forwarded_client_counted_while_it_runs() -> None:
    app = Recorder()
    forwarded, table, _ = layer(app)
    await forwarded(scope("10.0.0.2", b"198.51.100.1, 203.0.113.5", b"10.0.0.9"), nothing, _no_send)
    seen = app.scopes[0]
    assert seen["client"] == ("203.0.113.5", 0) and seen["state"]["log_extra"] == {"client": "203.0.113.5"}
    assert app.counts == [{"203.0.113.5": 1}] and table.connections == {}  # given back at the end
    failing = Recorder(fail=True)
    forwarded, table, _ = layer(failing)
    with pytest.raises(RuntimeError):
        await forwarded(scope("10.0.0.2", b"203.0.113.5"), nothing, _no_send)
    assert table.connections == {}  # given back when the app fails too
    await layer(app)[0](scope("10.0.0.2"), nothing, _no_send)  # no header: the proxy's own request
    assert app.scopes[-1]["client"] == ("10.0.0.2", 0)


async def test_a_client_alone_passes_its_cap_while_connections_are_free() -> None:
    app = Recorder()
    forwarded, table, _ = layer(app, max_connections=1, budget=16)  # 14 open to anyone, the last 2 for newcomers
    for _ in range(13):
        assert table.connect("203.0.113.5") is None  # issue 40: past its cap of 1, nobody else wants them
    await forwarded(scope("10.0.0.2", b"203.0.113.5"), nothing, _no_send)
    assert len(app.scopes) == 1 and table.connections == {"203.0.113.5": 13}


async def test_past_the_cap_a_request_and_a_handshake_get_429() -> None:
    app = Recorder()
    forwarded, table, _ = layer(app, max_connections=1, budget=16)  # the last 2 of 16 only for newcomers
    for _ in range(14):
        table.connect("203.0.113.5")  # it holds the open part: its cap engages
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await forwarded(scope("10.0.0.2", b"203.0.113.5"), nothing, send)
    ws = scope("10.0.0.2", b"203.0.113.5", kind="websocket", extensions={"websocket.http.response": {}})
    await forwarded(ws, nothing, send)
    await forwarded(scope("10.0.0.2", b"203.0.113.5", kind="websocket"), nothing, send)  # a server without denials
    assert app.scopes == []
    assert [m["type"] for m in sent] == [
        "http.response.start",
        "http.response.body",
        "websocket.http.response.start",
        "websocket.http.response.body",
        "websocket.close",
    ]
    assert sent[0]["status"] == 429 and (b"retry-after", b"1") in sent[0]["headers"]
    assert b"limits.max_connections_per_client" in sent[1]["body"] and sent[3]["body"] == sent[1]["body"]
    assert table.connections == {"203.0.113.5": 14} and table.refusals == {"client_connections": 3}
    await forwarded(scope("10.0.0.2", b"198.51.100.7"), nothing, send)  # a newcomer: the share kept for it
    assert len(app.scopes) == 1
    table.connect("198.51.100.8")
    table.connect("198.51.100.9")  # the budget is full: everyone is refused
    await forwarded(scope("10.0.0.2", b"198.51.100.7"), nothing, send)
    assert b"limits.max_connections" in sent[-1]["body"] and table.refusals["server_connections"] == 1


async def test_unreadable_headers_fall_back_counted_and_warned_once_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    app = Recorder()
    forwarded, _, metrics = layer(app)
    with caplog.at_level(logging.WARNING, logger="kgserve.forwarded"):
        for garbage in (b"203.0.113.5, unknown", b"\x00\r evil"):
            await forwarded(scope("10.0.0.2", garbage), nothing, _no_send)
    assert [s["client"] for s in app.scopes] == [("10.0.0.2", 0)] * 2
    assert metrics.registry.get_sample_value("kgserve_forwarded_for_invalid_total") == 2
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "trusted proxy 10.0.0.2" in warnings[0] and "unknown" in warnings[0]


async def _no_send(message: Any) -> None:
    raise AssertionError(f"nothing should be sent: {message}")
