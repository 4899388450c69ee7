"""kgserve.engine.dispatch's rule on its own (no process): which turns are written, which held, in which order
they go, and when the reserve is lent."""

from __future__ import annotations

import asyncio
import time

import pytest

from kgserve.engine.reserve import RUNS_KEPT, EngineLoad, thread_reserve

from .dispatch_rig import Rig


def test_the_reserve_size() -> None:
    plan = thread_reserve(128, 1 / 16, 2.0)
    assert plan is not None and (plan.reserve, plan.small, plan.prefetch, plan.lend_bound_s) == (8, 8, 8, 2.0)
    small = thread_reserve(4, 1 / 16)
    assert small is not None and small.reserve == 1  # at least one thread
    assert thread_reserve(1, 0.5) is None and thread_reserve(128, 0) is None and thread_reserve(None, 0.1) is None


def test_a_lone_client_gets_all_but_the_reserve_a_newcomer_the_reserve_without_an_estimate() -> None:
    rig = Rig(8, 0.25)  # 2 reserved, for clients holding at most 2; nothing lent (no estimate, no bound)
    hog = [rig.submit("a", f"a{index}") for index in range(10)]
    assert [stream.held for stream in hog] == [False] * 6 + [True] * 4
    newcomer = [rig.submit("b", f"b{index}") for index in range(3)]
    assert [stream.held for stream in newcomer] == [False, False, True]
    assert rig.routers[0].load.in_engine == 8 and rig.dispatch.queue.turns == 5
    rig.answer(newcomer[0])  # the reserve's thread frees: b holds 1, so its next query takes it
    assert not newcomer[2].held
    rig.answer(hog[0])
    assert hog[6].held  # 7 of 8 in use: the free thread is the reserve's (b might send another)
    rig.answer(newcomer[1])
    rig.answer(newcomer[2])
    assert not hog[6].held and hog[7].held  # 5 in use: the hog's next query, in arrival order


def test_a_lone_client_borrows_the_reserve_and_queues_a_few_for_short_searches() -> None:
    rig = Rig(8, 0.25, lend_s=2.0)
    rig.learn(0.001)  # 100 visits: 0.1 s
    hog = [rig.submit("a", f"a{index}", visits=100) for index in range(12)]
    assert [stream.held for stream in hog] == [False] * 10 + [True] * 2  # 8 threads + 2 queued inside KataGo
    long = rig.submit("a", "long", visits=10_000)  # 10 s: past the bound, never lent
    rig.answer(hog[0])
    assert not hog[10].held and long.held


def test_no_lending_past_the_bound_or_while_another_client_waits() -> None:
    rig = Rig(8, 0.25, lend_s=2.0)
    rig.learn(0.1)  # 100 visits: 10 s, past the bound
    hog = [rig.submit("a", f"a{index}", visits=100) for index in range(8)]
    assert [stream.held for stream in hog] == [False] * 6 + [True] * 2
    other = [rig.submit("c", f"c{index}", visits=100) for index in range(4)]
    assert [stream.held for stream in other] == [False, False, True, True]  # the reserve: c held nothing
    rig.learn(0.001)  # short searches from now on
    rig.answer(hog[0])
    # a reserved thread is free, neither client is small, and two wait: nothing is lent
    assert hog[6].held and other[2].held and rig.routers[0].load.in_engine == 7
    rig.answer(other[0])
    assert not other[2].held and hog[6].held  # c is small again: the reserve is its


def test_a_long_search_is_lent_a_thread_once_another_running_search_is_near_its_end() -> None:
    rig = Rig(4, 0.25, lend_s=2.0)  # 1 reserved
    rig.learn(0.038)  # 100 visits: 3.8 s, past the bound
    hog = [rig.submit("a", f"a{index}", visits=100) for index in range(6)]
    assert [stream.held for stream in hog] == [False] * 3 + [True] * 3  # started together: a newcomer would wait 3.8 s
    rig.age(1.7)
    rig.dispatch.freed(rig.routers[0])
    assert hog[3].held  # the first end is 2.1 s away
    rig.age(0.2)
    rig.dispatch.freed(rig.routers[0])  # what the dispatch's timer does
    assert not hog[3].held and hog[4].held  # 1.9 s away: lent, but never past the threads for a long search
    newcomer = rig.submit("b", "n", visits=100)
    assert newcomer.held
    rig.answer(hog[0])
    assert not newcomer.held and hog[4].held  # the thread that ended first is the newcomer's


def test_long_searches_of_a_lone_client_fill_every_thread_and_one_always_ends_within_the_bound() -> None:
    rig = Rig(4, 0.25, lend_s=2.0)  # 1 reserved
    rig.learn(0.038)  # 100 visits: 3.8 s, past the bound
    hog = [rig.submit("a", f"a{index}", visits=100) for index in range(60)]
    router = rig.routers[0]
    rig.age(1.9)
    rig.dispatch.freed(router)  # the timer's look: a0-a2 end within 2 s, a3 borrows the reserve
    full = 0
    for _ in range(40):  # each step: the oldest running search ends, 3.8 s after it started
        oldest = min(router.pieces(), key=lambda piece: piece.written_at)
        rig.age(oldest.written_at + 3.8 - time.monotonic())
        rig.answer(oldest.stream)
        rig.dispatch.freed(router)
        now = time.monotonic()
        if router.load.in_engine == 4:
            full += 1
            # a newcomer now would wait for the first end: within the bound (the searches' run time is learnt)
            assert min(piece.written_at + 3.8 - now for piece in router.pieces()) <= 2.0 + 0.05
    assert full >= 30, f"every thread busy after {full} of 40 ends"
    assert router.load.run_s(100) == pytest.approx(3.8, abs=0.05) and hog[-1].held


def test_searches_that_started_together_lend_nothing_however_many_threads() -> None:
    rig = Rig(128, 1 / 16, lend_s=2.0)  # 8 reserved
    rig.learn(0.05)  # 100 visits: 5 s
    hog = [rig.submit("a", f"a{index}", visits=100) for index in range(140)]
    assert sum(not stream.held for stream in hog) == 120
    rig.age(3.1)
    rig.dispatch.freed(rig.routers[0])
    assert sum(not stream.held for stream in hog) == 128  # every thread, none queued past them


def test_how_long_a_search_runs_is_learnt_per_visit_count_from_searches_that_started_on_a_free_thread() -> None:
    rig = Rig(2, 0.5, lend_s=2.0)
    rig.learn(0.001)  # short: lent, and one turn more queued inside KataGo
    streams = [rig.submit("a", f"a{index}", visits=100) for index in range(3)]
    assert [stream.pieces[0].at_once for stream in streams] == [True, True, False]
    load = rig.routers[0].load
    rig.age(3.0)
    rig.answer(streams[2])  # queued: its time includes its wait, not learnt
    assert load.run_s(100) is None
    rig.answer(streams[0])
    assert load.run_s(100) == pytest.approx(3.0, abs=0.1)
    small = rig.submit("b", "b0", visits=10)  # the reserve's thread, free
    assert small.pieces[0].at_once
    rig.age(0.5)
    rig.answer(small)  # another visit count: learnt apart (a small search says nothing of a long one's end)
    assert load.run_s(10) == pytest.approx(0.5, abs=0.1) and load.run_s(100) == pytest.approx(3.0, abs=0.1)
    assert load.run_s(50) is None


async def test_the_dispatch_looks_again_when_time_alone_lets_it_lend() -> None:
    rig = Rig(2, 0.5, lend_s=2.0)  # 1 reserved
    rig.learn(0.0215)  # 100 visits: 2.15 s, the first end 0.15 s past the bound
    first, second = rig.submit("a", "a0", visits=100), rig.submit("a", "a1", visits=100)
    assert second.held
    for _ in range(100):
        if not second.held:
            break
        await asyncio.sleep(0.02)
    assert not second.held  # no answer came: a timer looked again
    rig.dispatch.close()
    assert not rig.dispatch._wakes and first.pieces


def test_a_newcomer_waits_for_the_queued_turns_then_takes_a_free_thread() -> None:
    rig = Rig(4, 0.25, lend_s=2.0)  # 1 reserved, 1 queued when lent
    rig.learn(0.001)
    hog = [rig.submit("a", f"a{index}", visits=100) for index in range(6)]
    assert [stream.held for stream in hog] == [False] * 5 + [True]
    newcomer = rig.submit("b", "n", visits=100)
    assert newcomer.held  # no thread free: KataGo runs a4 (queued) at the next answer
    rig.answer(hog[0])
    assert newcomer.held and hog[5].held  # a4 took the thread; no more lending while b waits
    rig.answer(hog[1])
    assert not newcomer.held  # a thread free, and b holds nothing: the reserve is its
    assert not hog[5].held and rig.routers[0].load.in_engine == 5  # a waits alone again: lent again


def test_unkeyed_queries_are_never_held_and_off_holds_nothing() -> None:
    rig = Rig(2, 0.5)
    assert not any(rig.submit(None).held for _ in range(5))
    off = Rig(2, 0.0)
    assert not any(off.submit("a").held for _ in range(5)) and off.dispatch.queue.turns == 0


def test_held_queries_go_in_katagos_queue_order_priority_then_arrival() -> None:
    rig = Rig(2, 0.5)  # 1 open thread, 1 reserved
    running = rig.submit("a", "first")
    low, high, later = rig.submit("a", "low"), rig.submit("a", "high", priority=5), rig.submit("a", "later", priority=5)
    assert low.held and high.held and later.held
    order = []
    for _ in range(3):
        rig.answer(running)
        (running,) = [stream for stream in (low, high, later) if stream.pieces and not stream.done]
        order.append(running.caller_id)
    assert order == ["high", "later", "low"]


def test_terminating_a_held_query_answers_no_results_and_frees_nothing() -> None:
    rig = Rig(2, 0.5)
    first, held = rig.submit("a"), rig.submit("a", "h")
    assert held.held
    held.owner.abort(held)
    assert held.done and rig.dispatch.queue.turns == 0
    assert held._items is not None and held._items.get_nowait() == (
        b'{"id":"h","isDuringSearch":false,"noResults":true,"turnNumber":2}'
    )
    rig.answer(first)
    assert rig.routers[0].load.in_engine == 0


def test_a_terminate_of_a_held_querys_turn_is_answered_at_once() -> None:
    rig = Rig(2, 0.5)
    rig.submit("a")
    held = rig.submit("a", "h")
    held.owner.abort(held, frozenset({7}))  # not its turn: nothing
    assert held.held and not held.done
    held.owner.abort(held, frozenset({2, 7}))  # its turn (two moves: turn 2), as KataGo answers a queued one
    assert held.done and held._items is not None
    assert held._items.get_nowait() == b'{"id":"h","isDuringSearch":false,"noResults":true,"turnNumber":2}'


def test_an_engine_remembers_the_run_times_of_a_bounded_number_of_visit_counts() -> None:
    load = EngineLoad(4)
    for visits in range(1, RUNS_KEPT + 2):
        load.ran(visits, 1.0)
    assert load.run_s(1) is None and load.run_s(2) == 1.0 and load.run_s(RUNS_KEPT + 1) == 1.0
