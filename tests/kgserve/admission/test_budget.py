"""kgserve.admission.budget: bytes of work in flight counted per client and in all, and the burst's end."""

from __future__ import annotations

import platform

from kgserve.admission.budget import IDLE_AFTER_BYTES, MemoryBudget, query_cost
from kgserve.admission.clients import Client
from kgserve.procs.malloc import trim_malloc


def test_take_refuses_past_the_clients_share_and_the_total() -> None:
    budget = MemoryBudget(total=1600, per_client=1000)  # reserve 200 (open 1400), a small client holds <= 12
    one, two = Client("a"), Client("b")
    assert budget.take(one, 1000) and not budget.take(one, 1)
    assert "limits.memory_per_client_bytes" in str(budget.refusal(one, 1))
    assert budget.take(two, 400) and budget.held == budget.open
    budget.give(one, 1000)
    budget.give(two, 400)
    assert budget.held == 0 and one.memory == two.memory == 0


def test_the_reserve_is_only_for_clients_holding_little() -> None:
    budget = MemoryBudget(total=2048, per_client=1000)
    assert (budget.reserve, budget.open, budget.small) == (256, 1792, 16)
    hog, other = Client("hog"), Client("other")
    assert budget.take(hog, 1000) and budget.take(other, 792)  # the open part is full
    assert not budget.take(other, 1) and not budget.take(hog, 1)
    refused = str(budget.refusal(other, 1))
    assert "limits.memory_budget_bytes" in refused and "kept for clients holding less" in refused
    small = [Client(f"s{index}") for index in range(17)]
    for client in small[:16]:
        assert budget.take(client, 16)  # each up to `small`: 16 of them fit in the reserve at their largest
        assert not budget.take(client, 1)  # past `small`: not from the reserve
    assert budget.held == 2048 and not budget.take(small[16], 1)
    assert "2049 of 2048 bytes" in str(budget.refusal(small[16], 1))  # the whole budget now


def test_a_client_with_one_small_query_gets_in_while_six_addresses_fill_the_budget() -> None:
    # issue 27's second-round memory attack at the shipped sizes: six addresses send ~1 MB queries (each charged
    # its body on its Content-Length, then the query's cost) until refused; the well-behaved client still gets in
    budget = MemoryBudget(total=256 << 20, per_client=64 << 20)
    body = 1_040_000
    attackers = [Client(f"127.0.1.{index}") for index in range(6)]
    for _ in range(100):
        for attacker in attackers:
            if budget.take(attacker, body) and not budget.take(attacker, query_cost(body) - body):
                budget.give(attacker, body)
    assert all(attacker.memory >= 3 * query_cost(body) for attacker in attackers)
    assert budget.held <= budget.open  # a ~4 MiB query never comes out of the reserve
    for attacker in attackers:  # bodies in reading, charged before a byte is read: each at most `small`
        while budget.take(attacker, body):
            pass
    probe = Client("127.0.0.1")
    assert budget.take(probe, 200) and budget.take(probe, query_cost(200) - 200)


def test_what_never_fits_is_past_the_open_part_or_a_clients_share() -> None:
    budget = MemoryBudget(total=1600, per_client=1000)
    assert budget.never_fits(1000) is None and budget.never_fits(1001) is not None
    budget = MemoryBudget(total=1600, per_client=1600)
    assert budget.never_fits(1400) is None
    assert "1400: limits.memory_budget_bytes less its reserve" in str(budget.never_fits(1401))


def test_a_burst_over_calls_on_idle_once_and_small_work_never() -> None:
    budget = MemoryBudget(total=1 << 40, per_client=1 << 40)
    calls: list[int] = []
    budget.on_idle = lambda: calls.append(budget.held)
    client = Client("a")
    budget.take(client, 1000)
    budget.give(client, 1000)
    assert calls == []  # a small request: nothing to give back
    half = IDLE_AFTER_BYTES // 2
    budget.take(client, half)
    budget.take(client, half)
    budget.give(client, half)
    assert calls == []  # still holding: not over yet
    budget.give(client, half)
    assert calls == [0]
    budget.take(client, 10)
    budget.give(client, 10)
    assert calls == [0]  # the next burst starts from nothing


def test_trim_malloc_runs_where_glibc_is() -> None:
    assert trim_malloc() is (platform.libc_ver()[0] == "glibc")
