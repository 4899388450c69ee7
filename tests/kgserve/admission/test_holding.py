"""kgserve.admission.holding (issue 40): a request past its client's per-client bound while another client has work
in flight waits for room instead of a 429: woken when one of its client's queries is over, or when its client is
alone again; otherwise it gives up at its time limit."""

from __future__ import annotations

import asyncio

from kgserve.admission.limits import Admission, Refusal, Ticket
from kgserve.settings import LimitsSettings


def _admission() -> Admission:
    return Admission(LimitsSettings(max_inflight_queries=64, max_inflight_per_client=2))


def _ticket(admitted: Ticket | Refusal) -> Ticket:
    assert isinstance(admitted, Ticket), admitted
    return admitted


async def _waiting(admission: Admission, key: str) -> asyncio.Task[bool]:
    waiter = asyncio.create_task(admission.held.wait(key, 10))
    await asyncio.sleep(0)  # it is in the queue
    assert not waiter.done() and len(admission.held) == 1
    return waiter


async def test_a_held_request_is_woken_by_its_own_query_over_then_by_being_alone() -> None:
    admission = _admission()
    batch, other = admission.clients.hold("batch"), admission.clients.hold("other")
    others = _ticket(admission.admit(other, 1, 0))
    mine = [_ticket(admission.admit(batch, 1, 0)) for _ in range(2)]
    refused = admission.admit(batch, 1, 0, counted=False)
    assert isinstance(refused, Refusal) and refused.reason == "client_inflight"
    assert admission.clients.refusals == {}  # not counted: the caller holds it and tries again
    waiter = await _waiting(admission, "batch")
    admission.release(others)  # nothing of its own over, but the other client's last query: it is alone now
    assert await waiter
    _ticket(admission.admit(batch, 1, 0))  # alone: past its bound, up to the server-wide one's open part
    again = _ticket(admission.admit(other, 1, 0))
    waiter = await _waiting(admission, "batch")
    admission.release(mine[0])  # one of its own queries over: room for one
    assert await waiter and len(admission.held) == 0
    admission.release(again)


async def test_a_held_request_gives_up_at_its_time_limit_and_leaves_no_trace() -> None:
    admission = _admission()
    assert not await admission.held.wait("batch", 0.01)
    assert len(admission.held) == 0 and admission.held.waiting == {}


async def test_one_query_over_wakes_one_waiter_oldest_first() -> None:
    admission = _admission()
    batch, other = admission.clients.hold("batch"), admission.clients.hold("other")
    _ticket(admission.admit(other, 1, 0))
    mine = [_ticket(admission.admit(batch, 1, 0)) for _ in range(2)]
    first = asyncio.create_task(admission.held.wait("batch", 10))
    await asyncio.sleep(0)
    second = asyncio.create_task(admission.held.wait("batch", 10))
    await asyncio.sleep(0)
    admission.release(mine[0])
    assert await first
    await asyncio.sleep(0)
    assert not second.done()
    admission.release(mine[1])
    assert await second
