"""Issue 33's thread-reserve behaviour against the real simulated engine (a subprocess, real time), with the shipped
defaults unless a test says: a client alone uses every thread; a newcomer is answered while another client holds
the engine; a whole-game review is answered while another client keeps small queries going, and does not keep an
interactive query waiting; a held query goes to the engine that frees a thread first. Behaviour only: which
queries run where and when they end relative to each other, never how fast."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from kgserve.engine.pool import EnginePool
from tests.conftest import serving_cfg_with_threads, sim_env
from tests.helpers.engine_checks import make_query, ready_pool

from .conftest import pool_settings

pytestmark = pytest.mark.slow

SIM_ENV = sim_env(1.0, KGSERVE_SIM_SEED="1")  # the sim at real speed: searches of tens of milliseconds
MOVES = [
    [("B", "W")[index % 2], f"{column}{row}"]
    for index, (column, row) in enumerate((column, row) for column in "CEGJLN" for row in (3, 5, 7, 9, 11, 13, 15, 17))
][:24]  # 24 moves, none on an occupied point


def _query(name: str, visits: int, **body: Any) -> dict[str, Any]:
    return {"id": name, "moves": MOVES[:2], "rules": "chinese", "komi": 7.5, "boardXSize": 19, "boardYSize": 19,
            "maxVisits": visits, **body}  # fmt: skip


def _written(pool: EnginePool, engine: int = 0) -> int:
    """Queries written to engine `engine` and not finished (before issue 33, `pending` counted held ones too)."""
    status = pool.status()["engines"][engine]
    return int(status["pending"]) - int(status.get("held", 0))


async def _keep_going(pool: EnginePool, client: str, count: int, visits: int, stop: asyncio.Event) -> int:
    """`count` queries of `client` in flight, a new one as each ends, until `stop`; how many were answered."""
    answered = 0

    async def one(lane: int) -> None:
        nonlocal answered
        index = 0
        while not stop.is_set():
            lines = await pool.submit(make_query(_query(f"{client}.{lane}.{index}", visits)), client).collect()
            assert json.loads(lines[-1])["isDuringSearch"] is False
            answered += 1
            index += 1

    await asyncio.gather(*(one(lane) for lane in range(count)))
    return answered


async def test_a_lone_client_uses_every_thread_with_the_defaults(tmp_path: Path) -> None:
    settings = pool_settings(1, cfg=serving_cfg_with_threads(tmp_path, 2))  # 2 threads: 1 reserved (1/16, >= 1)
    async with ready_pool(settings, SIM_ENV) as pool:
        stop = asyncio.Event()
        seen: list[int] = []

        async def watch() -> None:
            while not stop.is_set():
                seen.append(_written(pool))
                await asyncio.sleep(0.005)

        async def run() -> None:
            await asyncio.sleep(1.5)  # the first searches end: the engine's search time is known
            seen.clear()
            await asyncio.sleep(1.0)
            stop.set()

        await asyncio.wait_for(asyncio.gather(_keep_going(pool, "lone", 8, 50, stop), watch(), run()), 60)
    assert max(seen) >= 2, f"the lone client never had both threads: {sorted(set(seen))}"


async def test_a_lone_client_gets_every_thread_for_searches_longer_than_the_lend_bound(tmp_path: Path) -> None:
    bound = 0.3  # the sim's 400-visit searches take ~0.6 s: each longer than the bound, so the reserve is lent only
    # while the other thread's search is about to end (a timer looks again then: no answer comes to wake the rule)
    settings = pool_settings(1, cfg=serving_cfg_with_threads(tmp_path, 2), lend_bound_s=bound)  # 1 reserved
    async with ready_pool(settings, SIM_ENV) as pool:
        stop = asyncio.Event()
        seen: list[int] = []

        async def watch() -> None:
            for _ in range(4000):  # 20 s at most; the first searches also teach the engine's search time
                seen.append(_written(pool))
                if seen[-1] >= 2:
                    break
                await asyncio.sleep(0.005)
            stop.set()

        await asyncio.wait_for(asyncio.gather(_keep_going(pool, "lone", 8, 400, stop), watch()), 60)
        estimates = [router.load.search_s(400) or 0.0 for router in pool.dispatch._routers()]
    assert max(seen) >= 2, f"the lone client never had both threads (searches estimated {estimates} s)"
    assert min(estimates) > bound, f"the premise: searches longer than the bound ({estimates} s)"


async def test_a_newcomer_is_answered_while_a_client_holds_every_thread(tmp_path: Path) -> None:
    settings = pool_settings(1, cfg=serving_cfg_with_threads(tmp_path, 4), thread_reserve=0.25)
    async with ready_pool(settings, SIM_ENV) as pool:
        stop = asyncio.Event()
        hog = asyncio.create_task(_keep_going(pool, "hog", 16, 50, stop))  # short searches: the reserve is lent
        await asyncio.sleep(1.5)  # the first searches end: the engine's search time is known
        seen = []
        for _ in range(100):
            seen.append(_written(pool))
            await asyncio.sleep(0.005)
        assert max(seen) >= 4  # alone, it had every thread (the reserved one lent)
        long = [pool.submit(make_query(_query(f"long{index}", 10_000_000)), "hog") for index in range(8)]
        newcomer = await asyncio.wait_for(pool.submit(make_query(_query("n", 20)), "newcomer").collect(), 30)
        assert json.loads(newcomer[-1])["id"] == "n" and "moveInfos" in json.loads(newcomer[-1])
        stop.set()
        for stream in long:
            pool.abort(stream)
        await asyncio.wait_for(asyncio.gather(hog, *(stream.collect() for stream in long)), 60)


async def test_a_review_is_answered_while_another_client_keeps_small_queries_going(tmp_path: Path) -> None:
    settings = pool_settings(1, cfg=serving_cfg_with_threads(tmp_path, 8))  # the defaults: 1 of 8 reserved
    async with ready_pool(settings, SIM_ENV) as pool:
        stop = asyncio.Event()
        small = asyncio.create_task(_keep_going(pool, "small", 3, 50, stop))
        await asyncio.sleep(0.3)
        review = {**_query("review", 20), "moves": MOVES, "analyzeTurns": list(range(len(MOVES) + 1))}
        lines = await asyncio.wait_for(pool.submit(make_query(review), "reviewer").collect(), 30)
        assert sorted(json.loads(line)["turnNumber"] for line in lines) == list(range(len(MOVES) + 1))
        assert all("moveInfos" in json.loads(line) for line in lines)
        assert not small.done()  # the other client kept its queries going all along
        stop.set()
        assert await asyncio.wait_for(small, 30) > 0


async def test_an_interactive_query_is_not_held_behind_a_many_turn_query(tmp_path: Path) -> None:
    settings = pool_settings(1, cfg=serving_cfg_with_threads(tmp_path, 4))
    async with ready_pool(settings, SIM_ENV) as pool:
        turns = list(range(len(MOVES) + 1))
        batch_body = {**_query("batch", 200), "moves": MOVES, "analyzeTurns": turns}
        batch = pool.submit(make_query(batch_body), "batcher")
        finals: list[bytes] = []
        first, ended = asyncio.Event(), asyncio.Event()

        def listen(item: bytes | BaseException | None) -> None:
            if isinstance(item, bytes):
                finals.append(item)
                first.set()
            else:
                ended.set()

        batch.listen(listen)
        await asyncio.wait_for(first.wait(), 30)
        interactive = pool.submit(make_query(_query("now", 50, priority=10**16)), "player")
        await asyncio.wait_for(interactive.collect(), 30)
        assert len(finals) <= len(turns) // 2, f"answered after {len(finals)} of the batch query's {len(turns)} turns"
        pool.abort(batch)
        await asyncio.wait_for(ended.wait(), 30)


async def test_a_held_query_goes_to_the_engine_that_frees_a_thread_first(tmp_path: Path) -> None:
    settings = pool_settings(2, cfg=serving_cfg_with_threads(tmp_path, 2), thread_reserve=0.5)
    async with ready_pool(settings, SIM_ENV) as pool:
        # each engine's open thread holds one of client a's long searches; a's next query waits in kgserve (before
        # issue 33: for the engine with the fewest outstanding visits, the second's)
        first = pool.submit(make_query(_query("first", 10_000_000)), "a")
        second = pool.submit(make_query(_query("second", 9_000_000)), "a")
        assert {first.engine.index, second.engine.index} == {0, 1}
        held = pool.submit(make_query(_query("held", 20)), "a")
        assert held.held
        pool.abort(first)  # the first's engine frees its thread first
        lines = await asyncio.wait_for(held.collect(), 30)
        assert json.loads(lines[-1])["id"] == "held" and held.engine is first.engine
        pool.abort(second)
        await asyncio.wait_for(asyncio.gather(first.collect(), second.collect()), 30)
