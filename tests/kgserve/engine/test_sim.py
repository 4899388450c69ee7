"""Engine and pool against the real simulated engine (`python -m kgserve.sim analysis ...`)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kgserve.engine.errors import EngineDied
from kgserve.engine.pool import EnginePool
from kgserve.engine.procutil import pid_alive
from kgserve.katago.protocol import READY_LINE
from tests.conftest import sim_env
from tests.helpers.engine_checks import (
    SLOW,
    check_abort_returns_the_partial_result,
    check_close_terminates_running_queries,
    check_engine_error_and_warning_lines_are_katagos,
    check_missing_model_crash_loop,
    check_sigkill_then_restart,
    kinds,
    make_query,
    ready_pool,
)

from .conftest import REFERENCE, pool_settings

SIM_ENV = sim_env(100, KGSERVE_SIM_SEED="1")


@pytest.fixture
async def engine_pool() -> AsyncIterator[EnginePool]:
    async with ready_pool(pool_settings(1), SIM_ENV) as pool:
        yield pool


async def test_status_of_a_simulated_engine(engine_pool: EnginePool) -> None:
    status = engine_pool.status()
    assert status["ready"] and status["simulated"]
    assert "sim" in status["katago_version"]
    assert status["model"] == "kgsim-b40c768.bin.gz"
    (engine,) = status["engines"]
    assert engine["state"] == "ready" and pid_alive(engine["pid"]) and engine["start_s"] > 0
    assert any(READY_LINE in line for line in engine["last_stderr"])


async def test_reference_samples(engine_pool: EnginePool) -> None:
    inputs = sorted((REFERENCE / "samples" / "inputs").glob("*.json"))
    queries = [make_query(path.read_text()) for path in inputs]
    streams = [engine_pool.submit(query) for query in queries]
    for query, stream in zip(queries, streams, strict=True):
        lines = await asyncio.wait_for(stream.collect(), 60)
        assert kinds(lines) == ["final"] * query.expected_finals
        docs = [json.loads(line) for line in lines]
        assert {doc["id"] for doc in docs} == {query.caller_id}
        turns = query.body.get("analyzeTurns")
        if turns:
            assert sorted(doc["turnNumber"] for doc in docs) == sorted(turns)
    assert engine_pool.status()["engines"][0]["outstanding_visits"] == 0


async def test_engine_error_and_warning_lines_are_katagos(engine_pool: EnginePool) -> None:
    await check_engine_error_and_warning_lines_are_katagos(engine_pool)


async def test_same_id_concurrent_queries_stay_apart(engine_pool: EnginePool) -> None:
    moves = [["B", "Q4"], ["W", "D4"], ["B", "Q16"], ["W", "D16"], ["B", "C3"], ["W", "R17"]]
    turn_sets = [sorted({(i + k * 3) % 7 for k in range(1 + i % 3)}) for i in range(40)]
    streams = [
        engine_pool.submit(
            make_query({**SLOW, "id": "dup", "moves": moves, "maxVisits": 20 + i, "analyzeTurns": turns})
        )
        for i, turns in enumerate(turn_sets)
    ]
    results = await asyncio.wait_for(asyncio.gather(*(stream.collect() for stream in streams)), 120)
    for turns, lines in zip(turn_sets, results, strict=True):
        docs = [json.loads(line) for line in lines]
        assert {doc["id"] for doc in docs} == {"dup"}
        assert sorted(doc["turnNumber"] for doc in docs) == turns


async def test_during_search_then_one_final(engine_pool: EnginePool) -> None:
    body = json.loads((REFERENCE / "protocol" / "during_search.in.jsonl").read_text())
    lines = await asyncio.wait_for(engine_pool.submit(make_query(body)).collect(), 60)
    assert kinds(lines)[-1] == "final" and set(kinds(lines)[:-1]) <= {"partial"}


async def test_abort_returns_the_partial_result(engine_pool: EnginePool) -> None:
    await check_abort_returns_the_partial_result(engine_pool)


async def test_sigkill_then_restart(engine_pool: EnginePool) -> None:
    await check_sigkill_then_restart(engine_pool)


async def test_close_terminates_running_queries() -> None:
    await check_close_terminates_running_queries(EnginePool(pool_settings(2), env=SIM_ENV), 4)


async def test_missing_model_crash_loop(tmp_path: Path) -> None:
    await check_missing_model_crash_loop(pool_settings(1), tmp_path / "missing.bin.gz", SIM_ENV, "134")


async def test_mixed_load_with_aborts_and_a_crash_settles_every_stream() -> None:
    pool = EnginePool(pool_settings(2), env=SIM_ENV)
    await pool.start()
    try:
        await pool.wait_ready(60)
        rng = random.Random(7)
        streams = []
        for i in range(150):
            visits = rng.choice([5, 50, 200, 10_000_000])
            turns = sorted(rng.sample(range(4), rng.randint(1, 3)))
            moves = [["B", "Q4"], ["W", "D4"], ["B", "Q16"]]
            body = {
                **SLOW,
                "id": rng.choice(["a", "b", "c"]),
                "moves": moves,
                "maxVisits": visits,
                "analyzeTurns": turns,
            }
            streams.append((turns, pool.submit(make_query(body))))
            if i % 3 == 0:
                pool.abort(streams[rng.randrange(len(streams))][1])
            if i == 100:
                os.kill(pool.status()["engines"][0]["pid"], signal.SIGKILL)
            await asyncio.sleep(rng.random() * 0.01)
        await asyncio.sleep(0.5)
        for _, stream in streams:
            if not stream.aborted:
                pool.abort(stream)
        died_on: list[int] = []
        for turns, stream in streams:
            try:
                lines = await asyncio.wait_for(stream.collect(), 30)
            except EngineDied:
                died_on.append(stream.engine.index)
                continue
            docs = [json.loads(line) for line in lines]
            assert sorted(doc["turnNumber"] for doc in docs) == turns  # one final per turn: full, partial or noResults
        # only the killed engine's streams died (how many of them were still running at the kill depends on the
        # machine's speed, so no count of finished streams is asserted)
        assert died_on and set(died_on) == {0}, died_on
        for engine in pool.status()["engines"]:
            assert engine["outstanding_visits"] == 0 and engine["pending"] == 0
            assert engine["counters"].get("unrouted", 0) == 0
    finally:
        await asyncio.wait_for(pool.close(5), 60)
