"""kgserve.admission.budget: bytes of work in flight counted per client and in all, and the burst's end."""

from __future__ import annotations

import platform

from kgserve.admission.budget import IDLE_AFTER_BYTES, MemoryBudget
from kgserve.admission.clients import Client
from kgserve.procs.malloc import trim_malloc


def test_take_refuses_past_the_clients_share_and_the_total() -> None:
    budget = MemoryBudget(total=100, per_client=60)
    one, two = Client("a"), Client("b")
    assert budget.take(one, 60) and not budget.take(one, 1)
    assert budget.refusal(one, 1) is not None and "limits.memory_per_client_bytes" in str(budget.refusal(one, 1))
    assert not budget.take(two, 41) and budget.take(two, 40)
    assert "limits.memory_budget_bytes" in str(budget.refusal(two, 1))
    budget.give(one, 60)
    budget.give(two, 40)
    assert budget.held == 0 and one.memory == two.memory == 0


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
