"""Engine and pool against the real simulated engine (`python -m kgserve.sim analysis ...`)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kgserve.engine.errors import EngineDied
from kgserve.engine.pool import EnginePool
from kgserve.engine.procutil import pid_alive
from kgserve.katago.protocol import READY_LINE, Query, classify_line, line_kind, locate_id
from kgserve.settings import Settings
from tests.conftest import analysis_query, sim_env

from .conftest import REFERENCE, make_query, pool_settings

SIM_ENV = sim_env(100, KGSERVE_SIM_SEED="1")
SLOW = analysis_query(None, moves=[["B", "Q4"]])


@pytest.fixture
async def engine_pool() -> AsyncIterator[EnginePool]:
    pool = EnginePool(pool_settings(1), env=SIM_ENV)
    await pool.start()
    try:
        await pool.wait_ready(60)
        yield pool
    finally:
        await asyncio.wait_for(pool.close(5), 60)


def kinds(lines: list[bytes]) -> list[str]:
    out: list[str] = []
    for line in lines:
        span = locate_id(line)
        out.append(line_kind(line, span[1]) if span else "no-id")
    return out


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
    expected: dict[str, list[bytes]] = {}
    for line in (REFERENCE / "protocol" / "errors.out.jsonl").read_bytes().splitlines():
        doc = json.loads(line)
        if "id" in doc and "action" not in doc:
            expected.setdefault(doc["id"], []).append(line)
    queries = [
        item
        for raw in (REFERENCE / "protocol" / "errors.in.jsonl").read_bytes().splitlines()
        if isinstance(item := classify_line(raw), Query)
    ]
    assert len(queries) == 9
    streams = [engine_pool.submit(query) for query in queries]
    for query, stream in zip(queries, streams, strict=True):
        lines = await asyncio.wait_for(stream.collect(), 60)
        want = expected[query.caller_id]
        if query.caller_id == "unknown_field":
            assert lines[0] == want[0] and kinds(lines) == ["warning", "final"]
        else:
            assert lines == want, query.caller_id


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
    stream = engine_pool.submit(make_query({**SLOW, "id": "long", "maxVisits": 10_000_000}))
    await asyncio.sleep(0.3)
    began = time.monotonic()
    engine_pool.abort(stream)
    lines = await asyncio.wait_for(stream.collect(), 30)
    assert kinds(lines)[-1] == "final" and json.loads(lines[-1])["id"] == "long"
    assert time.monotonic() - began < 5


async def test_sigkill_then_restart(engine_pool: EnginePool) -> None:
    streams = [engine_pool.submit(make_query({**SLOW, "id": f"q{i}", "maxVisits": 10_000_000})) for i in range(3)]
    pid = engine_pool.status()["engines"][0]["pid"]
    os.kill(pid, signal.SIGKILL)
    for stream in streams:
        with pytest.raises(EngineDied):
            await asyncio.wait_for(stream.collect(), 10)
    await engine_pool.wait_ready(60)
    engine = engine_pool.status()["engines"][0]
    assert engine["restarts"] == 1 and engine["pid"] != pid
    lines = await asyncio.wait_for(
        engine_pool.submit(make_query({**SLOW, "id": "after", "maxVisits": 5})).collect(), 30
    )
    assert kinds(lines) == ["final"]


async def check_close_terminates_running_queries(pool: EnginePool, count: int) -> None:
    """close() while `count` endless queries run: terminate_all gives each KataGo's final (partial) line."""
    await pool.start()
    await pool.wait_ready(60)
    pids = [engine["pid"] for engine in pool.status()["engines"]]
    streams = [pool.submit(make_query({**SLOW, "id": f"q{i}", "maxVisits": 10_000_000})) for i in range(count)]
    await asyncio.sleep(0.2)
    await asyncio.wait_for(pool.close(10), 60)
    for stream in streams:  # terminate_all: each got KataGo's final (partial) line, not EngineDied
        lines = await asyncio.wait_for(stream.collect(), 1)
        assert kinds(lines)[-1] == "final"
    assert not any(pid_alive(pid) for pid in pids)
    for engine in pool.status()["engines"]:  # the engine's exit statistics stay readable (kgbench direct)
        assert engine["state"] == "stopped" and any("NN rows" in line for line in engine["last_stderr"])


async def test_close_terminates_running_queries() -> None:
    await check_close_terminates_running_queries(EnginePool(pool_settings(2), env=SIM_ENV), 4)


async def check_missing_model_crash_loop(
    settings: Settings, missing: Path, env: dict[str, str] | None, exit_status: str
) -> None:
    """The backend's model file is gone: the engine aborts before it is ready, again and again; the pool's reason
    gives the `exit_status` (a real KataGo dies of SIGABRT: "status -6"; its shell transcript says 134)."""
    settings = settings.model_copy(
        update={
            "engine": settings.engine.model_copy(
                update={"restart_backoff_initial_s": 0.3, "restart_backoff_max_s": 0.6}
            )
        }
    )
    backend = settings.engine.backend
    changed = settings.engine.backends[backend].model_copy(update={"model": missing})
    engine = settings.engine.model_copy(update={"backends": {**settings.engine.backends, backend: changed}})
    pool = EnginePool(settings.model_copy(update={"engine": engine}), env=env)
    began = time.monotonic()
    await pool.start()
    try:
        # polled, not a fixed 2.5 s: a real KataGo on a loaded machine may take longer to fail, and a second
        # failure must be in (the first restart's backoff has run), so that the reason tells of a crash loop
        async with asyncio.timeout(60):
            while not _crash_looped(pool, exit_status):  # noqa: ASYNC110 (the pool has no event for it)
                await asyncio.sleep(0.05)
            await asyncio.sleep(2.0)  # more backoffs: 0.3, 0.6, 0.6, ...
        status = pool.status()
        slot = status["engines"][0]
        assert not status["ready"] and f"status {exit_status}" in status["reason"]
        # no busy loop: at most one restart per 0.3 s (the first backoff; the later ones are 0.6 s)
        assert 1 <= slot["restarts"] <= 1 + (time.monotonic() - began) / 0.3
        assert any(missing.name in line for line in slot["last_stderr"])
    finally:
        await asyncio.wait_for(pool.close(1), 30)


def _crash_looped(pool: EnginePool, exit_status: str) -> bool:
    """Engine 0 failed with this exit status and has been restarted at least once."""
    status = pool.status()
    return f"status {exit_status}" in (status["reason"] or "") and int(status["engines"][0]["restarts"]) >= 1


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
