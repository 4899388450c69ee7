"""kgserve's engine pool checked against any engine: the simulated one (tests/kgserve/engine/test_sim.py) and a
real KataGo (tests/katago/test_engine.py). `ready_pool` is the pool both test folders' `engine_pool` fixture
yields; the checks take the started pool (or what they need to start one)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest

from kgserve.engine.errors import EngineDied
from kgserve.engine.pool import EnginePool
from kgserve.engine.procutil import pid_alive
from kgserve.katago.protocol import Query, classify_line, line_kind, locate_id
from kgserve.settings import Settings
from tests.conftest import REFERENCE, analysis_query

SLOW = analysis_query(None, moves=[["B", "Q4"]])


@contextlib.asynccontextmanager
async def ready_pool(settings: Settings, env: Mapping[str, str] | None = None) -> AsyncIterator[EnginePool]:
    """A started EnginePool, ready within 60 s; closed (within 60 s) on the way out."""
    pool = EnginePool(settings, env=env)
    await pool.start()
    try:
        await pool.wait_ready(60)
        yield pool
    finally:
        await asyncio.wait_for(pool.close(5), 60)


def make_query(body: dict[str, object] | str) -> Query:
    line = body if isinstance(body, str) else json.dumps(body)
    item = classify_line(line.encode())
    assert isinstance(item, Query), item
    return item


def kinds(lines: list[bytes]) -> list[str]:
    out: list[str] = []
    for line in lines:
        span = locate_id(line)
        out.append(line_kind(line, span[1]) if span else "no-id")
    return out


async def check_engine_error_and_warning_lines_are_katagos(engine_pool: EnginePool) -> None:
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


async def check_abort_returns_the_partial_result(engine_pool: EnginePool) -> None:
    stream = engine_pool.submit(make_query({**SLOW, "id": "long", "maxVisits": 10_000_000}))
    await asyncio.sleep(0.3)
    began = time.monotonic()
    engine_pool.abort(stream)
    lines = await asyncio.wait_for(stream.collect(), 30)
    assert kinds(lines)[-1] == "final" and json.loads(lines[-1])["id"] == "long"
    assert time.monotonic() - began < 5


async def check_sigkill_then_restart(engine_pool: EnginePool) -> None:
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


FROZEN_PROBES = {"liveness_interval_s": 0.5, "silent_probe_s": 0.5, "probe_late_s": 1.5, "liveness_timeout_s": 120.0}


async def check_a_frozen_engine_takes_no_new_query(settings: Settings, env: Mapping[str, str] | None) -> None:
    """Two engines, one SIGSTOPped while idle (issue 27, attack 9): every query sent afterwards is answered (those
    routed to the frozen engine before it was found out move to the other), the pool says degraded with that
    engine frozen, new queries go to the healthy one only, and after SIGCONT the engine takes queries again.
    `settings`: two engines, with FROZEN_PROBES (a kill far away, so that the engine is only frozen)."""
    async with ready_pool(settings, env) as pool:
        await pool.wait_ready(60, count=2)
        frozen_pid = pool.status()["engines"][0]["pid"]
        os.kill(frozen_pid, signal.SIGSTOP)
        try:
            small = [make_query({**SLOW, "id": f"s{i}", "maxVisits": 5}) for i in range(8)]
            streams = [pool.submit(query) for query in small]  # some go to the frozen (idle: fewest visits)
            for stream in streams:  # none waits for the kill (120 s away): they moved
                assert kinds(await asyncio.wait_for(stream.collect(), 60))[-1] == "final"
            async with asyncio.timeout(60):
                while pool.status()["engines"][0]["state"] != "frozen":  # noqa: ASYNC110 (no event for it)
                    await asyncio.sleep(0.05)
            status = pool.status()
            assert status["degraded"] and "frozen" in (status["reason"] or "")
            assert status["engines"][0]["restarts"] == 0  # frozen, not killed
            later = [pool.submit(make_query({**SLOW, "id": f"l{i}", "maxVisits": 5})) for i in range(4)]
            assert {stream.engine.index for stream in later} == {1}
            for stream in later:
                assert kinds(await asyncio.wait_for(stream.collect(), 60))[-1] == "final"
        finally:
            os.kill(frozen_pid, signal.SIGCONT)
        async with asyncio.timeout(60):
            while pool.status()["engines"][0]["state"] != "ready":  # noqa: ASYNC110 (thawed by the next answer)
                await asyncio.sleep(0.05)
        assert not pool.status()["degraded"] and pool.status()["engines"][0]["pid"] == frozen_pid
