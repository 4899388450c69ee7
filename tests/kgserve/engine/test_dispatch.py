"""kgserve.engine.dispatch's rule on its own: which queries are written, which held, in which order they go."""

from __future__ import annotations

from typing import Any

from kgserve.engine.dispatch import Dispatch, thread_reserve
from kgserve.engine.stream import QueryStream
from tests.helpers.engine_checks import make_query


class _Owner:
    def abort(self, stream: QueryStream, turns: frozenset[int] | None = None) -> None:
        pass


def _stream(client: str | None, name: str = "q", **body: Any) -> QueryStream:
    query = make_query({"id": name, "moves": [], "boardXSize": 19, "boardYSize": 19, **body})
    stream = QueryStream(_Owner(), query, name, 100)
    stream.client = client
    return stream


def test_the_reserve_size() -> None:
    assert thread_reserve(128, 1 / 16) is not None
    plan = thread_reserve(128, 1 / 16)
    assert plan is not None and (plan.reserve, plan.small) == (8, 8)
    small = thread_reserve(4, 1 / 16)
    assert small is not None and small.reserve == 1  # at least one thread
    assert thread_reserve(1, 0.5) is None and thread_reserve(128, 0) is None and thread_reserve(None, 0.1) is None


def test_a_lone_client_gets_all_but_the_reserve_a_newcomer_the_reserve() -> None:
    dispatch = Dispatch(thread_reserve(8, 0.25))  # 2 reserved, for clients holding at most 2
    hog = [_stream("a", f"a{index}") for index in range(10)]
    assert [dispatch.admit(stream) for stream in hog] == [True] * 6 + [False] * 4
    newcomer = [_stream("b", f"b{index}") for index in range(3)]
    assert [dispatch.admit(stream) for stream in newcomer] == [True, True, False]
    assert dispatch.in_engine == 8 and dispatch.held == 5
    dispatch.release(newcomer[0], 1)  # the reserve's thread frees: b holds 1, so its next query takes it
    assert dispatch.ready() == [newcomer[2]]
    dispatch.release(hog[0], 1)
    assert dispatch.ready() == []  # 7 of 8 in use: the free thread is the reserve's (b might send another)
    dispatch.release(newcomer[1], 1)
    dispatch.release(newcomer[2], 1)
    assert dispatch.ready() == [hog[6]]  # 5 in use: the hog's next query, in arrival order


def test_unkeyed_queries_are_never_held_and_off_holds_nothing() -> None:
    dispatch = Dispatch(thread_reserve(2, 0.5))
    assert all(dispatch.admit(_stream(None)) for _ in range(5))
    off = Dispatch(None)
    assert all(off.admit(_stream("a")) for _ in range(5)) and off.held == 0


def test_held_queries_go_in_katagos_queue_order_priority_then_arrival() -> None:
    dispatch = Dispatch(thread_reserve(2, 0.5))  # 1 open thread, 1 reserved
    first = _stream("a", "first")
    assert dispatch.admit(first)
    low, high, high_later = _stream("a", "low"), _stream("a", "high", priority=5), _stream("a", "later", priority=5)
    assert not any(dispatch.admit(stream) for stream in (low, high, high_later))
    order = []
    running = first
    for _ in range(3):
        dispatch.release(running, 1)
        (running,) = dispatch.ready()
        order.append(running.caller_id)
    assert order == ["high", "later", "low"]


def test_forget_takes_a_held_query_off() -> None:
    dispatch = Dispatch(thread_reserve(2, 0.5))
    first, held = _stream("a"), _stream("a")
    assert dispatch.admit(first) and not dispatch.admit(held)
    dispatch.forget(held)
    dispatch.release(first, 1)
    assert dispatch.held == 0 and dispatch.ready() == [] and dispatch.in_engine == 0
