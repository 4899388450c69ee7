"""EnginePool with fake engines: selection, crash -> EngineDied + restart, crash-loop backoff, close."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import logging
import os
import signal
import time
from pathlib import Path

import pytest

from kgserve.engine.engine import EngineSpec
from kgserve.engine.errors import EngineDied, NoEngineReady
from kgserve.engine.pool import EnginePool
from kgserve.engine.procutil import pid_alive
from kgserve.katago.cfg import cfg_max_visits
from tests.helpers.engine_checks import make_query

from .conftest import REFERENCE, fake_argv, pool_settings


def fake_pool(model: Path, processes: int = 1, **engine: object) -> EnginePool:
    return EnginePool(
        pool_settings(processes, **engine),
        env={key: value for key, value in os.environ.items() if not key.startswith("FAKE_")},
        spec_overrides={"argv": fake_argv(model), "startup_timeout_s": 30.0},
    )


async def test_least_outstanding_visits_and_status(model_file: Path) -> None:
    pool = fake_pool(model_file, processes=2)
    await pool.start()
    try:
        await pool.wait_ready(60)
        status = pool.status()
        assert status["ready"] and status["reason"] is None
        assert status["katago_version"] == "1.17.2-fake" and status["model"] == "model.bin.gz"
        assert [e["state"] for e in status["engines"]] == ["ready", "ready"]
        heavy = pool.submit(make_query({"id": "h", "moves": [], "maxVisits": 1000, "fakeDelay": 60}))
        light = [
            pool.submit(make_query({"id": f"l{i}", "moves": [], "maxVisits": 10, "fakeDelay": 60})) for i in range(3)
        ]
        assert {s.engine.index for s in light} == {1 - heavy.engine.index}
        visits = {e["index"]: e["outstanding_visits"] for e in pool.status()["engines"]}
        assert visits == {heavy.engine.index: 1000, 1 - heavy.engine.index: 30}
        for stream in [heavy, *light]:
            pool.abort(stream)
        await asyncio.wait_for(asyncio.gather(*(s.collect() for s in [heavy, *light])), 10)
        counters = pool.status()["engines"][0]["counters"]
        assert counters["queries"] >= 1 and counters["aborted"] >= 1
    finally:
        await pool.close(5)
    assert [e["state"] for e in pool.status()["engines"]] == ["stopped", "stopped"]
    with pytest.raises(NoEngineReady):
        pool.submit(make_query({"id": "late", "moves": []}))


async def test_crash_fails_pending_streams_and_restarts(model_file: Path) -> None:
    pool = fake_pool(model_file)
    await pool.start()
    try:
        await pool.wait_ready(60)
        streams = [pool.submit(make_query({"id": f"q{i}", "moves": [], "fakeDelay": 60})) for i in range(4)]
        old_pid = pool.status()["engines"][0]["pid"]
        began = time.monotonic()
        os.kill(old_pid, signal.SIGKILL)
        for stream in streams:
            with pytest.raises(EngineDied):
                await asyncio.wait_for(stream.collect(), 10)
        assert time.monotonic() - began < 3
        assert not pool.ready
        with pytest.raises(NoEngineReady):
            pool.submit(make_query({"id": "during", "moves": []}))
        await pool.wait_ready(60)
        engine = pool.status()["engines"][0]
        assert engine["restarts"] == 1 and engine["pid"] != old_pid and engine["state"] == "ready"
        assert "signal" in (engine["last_error"] or "") or "-9" in (engine["last_error"] or "")
        lines = await asyncio.wait_for(pool.submit(make_query({"id": "after", "moves": []})).collect(), 10)
        assert json.loads(lines[0])["id"] == "after"
    finally:
        await pool.close(5)


async def test_crash_loop_backs_off_and_keeps_stderr(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kgserve.engine")
    pool = fake_pool(tmp_path / "missing.bin.gz", restart_backoff_initial_s=0.2, restart_backoff_max_s=0.8)
    await pool.start()
    try:
        await asyncio.sleep(3.0)
        status = pool.status()
        engine = status["engines"][0]
        assert engine["state"] in ("failed", "restarting")
        assert any("Error loading or parsing model file" in line for line in engine["last_stderr"])
        assert not status["ready"] and "134" in status["reason"]
        with pytest.raises(NoEngineReady, match="134"):
            pool.submit(make_query({"id": "x", "moves": []}))
    finally:
        await asyncio.wait_for(pool.close(1), 30)
    assert pool.status()["engines"][0]["state"] == "stopped"
    failures = [r for r in caplog.records if "failed to start" in r.getMessage()]
    delays = [float(r.getMessage().rsplit("retrying in ", 1)[1].rstrip("s")) for r in failures]
    assert len(delays) >= 2 and engine["restarts"] >= len(delays) - 1
    assert delays[:4] == [0.2, 0.4, 0.8, 0.8][: len(delays[:4])]  # doubles up to the maximum, stays there
    starts = [r.created for r in caplog.records if "started pid" in r.getMessage()]
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert all(gap >= delay for gap, delay in zip(gaps, delays, strict=False)), (gaps, delays)


async def test_close_kills_engines_and_settles_streams(model_file: Path) -> None:
    pool = fake_pool(model_file, processes=2)
    await pool.start()
    await pool.wait_ready(60)
    pids = [e["pid"] for e in pool.status()["engines"]]
    stuck = pool.submit(make_query({"id": "s", "moves": [], "fakeDelay": 60, "fakeIgnoreTerminate": True}))
    normal = pool.submit(make_query({"id": "n", "moves": [], "fakeDelay": 60}))
    await asyncio.wait_for(pool.close(0.5), 30)
    assert not any(pid_alive(pid) for pid in pids)
    assert stuck.done and normal.done
    with pytest.raises(EngineDied):
        await stuck.collect()


async def test_close_while_starting(model_file: Path) -> None:
    pool = EnginePool(
        pool_settings(1),
        env={**os.environ, "FAKE_STARTUP_S": "30"},
        spec_overrides={"argv": fake_argv(model_file)},
    )
    await pool.start()
    await asyncio.sleep(0.5)
    pid = pool._slots[0].engine.pid if pool._slots[0].engine else None
    await asyncio.wait_for(pool.close(1), 10)
    assert pid is None or not pid_alive(pid)


def test_cfg_max_visits(tmp_path: Path) -> None:
    assert cfg_max_visits(REFERENCE / "analysis.cfg") == 100
    cfg = tmp_path / "a.cfg"
    cfg.write_text("# maxVisits = 5\nmaxVisits = 700  # comment\n")
    assert cfg_max_visits(cfg) == 700
    assert cfg_max_visits(tmp_path / "none.cfg") is None


class HalfBrokenPool(EnginePool):
    """Engine 1 has no model file: it crash-loops while engine 0 serves."""

    def engine_spec(self, index: int) -> EngineSpec:
        spec = super().engine_spec(index)
        if index == 1:
            return dataclasses.replace(spec, argv=fake_argv(Path("/nonexistent/model.bin.gz")))
        return spec


async def test_min_ready_lets_the_pool_serve_with_a_failing_engine(model_file: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("FAKE_")}
    overrides = {"argv": fake_argv(model_file)}
    pool = HalfBrokenPool(pool_settings(2, min_ready=1), env=env, spec_overrides=overrides)
    strict = HalfBrokenPool(pool_settings(2), env=env, spec_overrides=overrides)
    await pool.start()
    await strict.start()
    try:
        await pool.wait_ready(60)
        async with asyncio.timeout(30):  # polled: on a loaded machine engine 1 may still be starting after 0.5 s
            while pool.status()["engines"][1]["state"] not in ("failed", "restarting"):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        status = pool.status()
        assert status["ready"] and status["required_ready"] == 1
        assert status["engines"][0]["state"] == "ready"
        assert status["engines"][1]["state"] in ("failed", "restarting")
        streams = [pool.submit(make_query({"id": f"q{i}", "moves": []})) for i in range(5)]
        assert {stream.engine.index for stream in streams} == {0}
        await asyncio.wait_for(asyncio.gather(*(stream.collect() for stream in streams)), 10)
        await strict.wait_ready(60, count=1)
        assert not strict.status()["ready"] and "1 of 2 engine(s) ready, 2 required" in strict.status()["reason"]
    finally:
        await asyncio.gather(pool.close(1), strict.close(1))
