"""The thread reserve (issue 27's slot hog, kgserve.engine.dispatch) against the real simulated engine: one client
filling every thread with long searches leaves the last thread to a client holding none, its further queries wait
in kgserve, and a held-back query ends as KataGo ends a queued one (terminate, close, the engine's death).
Behaviour only: which queries are written, held and answered, never how fast."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kgserve.engine.errors import EngineDied
from kgserve.engine.pool import EnginePool
from kgserve.engine.stream import QueryStream
from tests.conftest import serving_cfg_with_threads, sim_env
from tests.helpers.engine_checks import kinds, make_query, ready_pool

from .conftest import pool_settings

THREADS = 4  # with a reserve share of 1/4: the last thread only for clients holding at most one
LONG = 10_000_000  # visits: a search that runs until it is terminated
HOG = "10.0.0.1"
SIM_ENV = sim_env(100, KGSERVE_SIM_SEED="1")


def _cfg(directory: Path) -> Path:
    return serving_cfg_with_threads(directory, THREADS)


@pytest.fixture
async def reserve_pool(tmp_path: Path) -> AsyncIterator[EnginePool]:
    async with ready_pool(pool_settings(1, cfg=_cfg(tmp_path), thread_reserve=0.25), SIM_ENV) as pool:
        yield pool


def _query(name: str, visits: int = LONG) -> dict[str, object]:
    return {
        "id": name,
        "moves": [["B", "Q4"], ["W", "D4"]],
        "rules": "chinese",
        "komi": 7.5,
        "boardXSize": 19,
        "boardYSize": 19,
        "maxVisits": visits,
    }


def _hog(pool: EnginePool, count: int) -> list[QueryStream]:
    return [pool.submit(make_query(_query(f"h{index}")), HOG) for index in range(count)]


def _held(pool: EnginePool) -> int:
    return int(pool.status()["held"]["held_queries"])


async def test_a_lone_client_gets_all_threads_but_the_reserve_the_rest_wait_in_kgserve(
    reserve_pool: EnginePool,
) -> None:
    streams = _hog(reserve_pool, 7)
    assert [stream.held for stream in streams] == [False] * (THREADS - 1) + [True] * 4
    assert _held(reserve_pool) == 4 and reserve_pool.status()["engines"][0]["pending"] == THREADS - 1


async def test_a_newcomer_gets_the_reserved_thread_while_the_hogs_extra_queries_wait(reserve_pool: EnginePool) -> None:
    hog = _hog(reserve_pool, 6)
    newcomer = reserve_pool.submit(make_query(_query("n", visits=20)), "10.0.0.2")
    assert not newcomer.held
    lines = await asyncio.wait_for(newcomer.collect(), 30)
    assert kinds(lines) == ["final"] and json.loads(lines[-1])["id"] == "n"
    assert not any(stream.done for stream in hog) and _held(reserve_pool) == 3
    # the newcomer's thread is free again, but it is the reserve's: the hog's next query still waits
    assert [stream.held for stream in hog] == [False] * (THREADS - 1) + [True] * 3


async def test_a_held_query_ends_next_when_a_query_of_its_client_finishes(reserve_pool: EnginePool) -> None:
    hog = _hog(reserve_pool, 5)
    reserve_pool.abort(hog[0])
    await asyncio.wait_for(hog[0].collect(), 30)
    assert not hog[3].held and hog[4].held  # arrival order: h3 took the freed thread
    assert _held(reserve_pool) == 1


async def test_terminating_a_held_query_answers_katagos_no_results_at_once(reserve_pool: EnginePool) -> None:
    hog = _hog(reserve_pool, 5)
    held = hog[4]
    reserve_pool.abort(held)
    assert held.done and _held(reserve_pool) == 1 and hog[3].held
    # what KataGo writes for a terminated query that had not started (katago-reference terminate_queued)
    assert await held.collect() == [b'{"id":"h4","isDuringSearch":false,"noResults":true,"turnNumber":2}']
    assert not any(stream.done for stream in hog[:4])


async def test_close_settles_held_queries_as_katagos_terminate_all_does(tmp_path: Path) -> None:
    async with ready_pool(pool_settings(1, cfg=_cfg(tmp_path), thread_reserve=0.25), SIM_ENV) as pool:
        hog = _hog(pool, 6)
    for stream in hog[THREADS - 1 :]:
        assert await stream.collect() == [
            b'{"id":"%s","isDuringSearch":false,"noResults":true,"turnNumber":2}' % stream.caller_id.encode()
        ]
    for stream in hog[: THREADS - 1]:  # the running ones: KataGo's partial final
        assert kinds(await stream.collect()) == ["final"]


async def test_the_engines_death_ends_held_queries_with_engine_died(reserve_pool: EnginePool) -> None:
    hog = _hog(reserve_pool, 6)
    pid = reserve_pool.status()["engines"][0]["pid"]
    os.kill(pid, signal.SIGKILL)
    for stream in hog:
        with pytest.raises(EngineDied):
            await asyncio.wait_for(stream.collect(), 30)


async def test_the_reserve_off_writes_every_query_at_once(tmp_path: Path) -> None:
    async with ready_pool(pool_settings(1, cfg=_cfg(tmp_path), thread_reserve=0.0), SIM_ENV) as pool:
        hog = _hog(pool, 7)
        assert not any(stream.held for stream in hog) and _held(pool) == 0
