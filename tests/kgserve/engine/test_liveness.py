"""Liveness probe (issue 12): an engine frozen with SIGSTOP is noticed, killed and restarted, and the query
it held fails with EngineDied instead of waiting for ever; a frozen engine takes no new query (issue 27)."""

from __future__ import annotations

import asyncio
import os
import signal

from kgserve.engine.engine import EngineDied
from kgserve.engine.pool import EnginePool
from kgserve.engine.procutil import pid_alive
from tests.conftest import analysis_query, sim_env
from tests.helpers.engine_checks import FROZEN_PROBES, check_a_frozen_engine_takes_no_new_query, make_query

from .conftest import pool_settings

SIM_ENV = sim_env(100)
LONG = analysis_query("long", max_visits=10_000_000)


async def test_a_stopped_engine_is_killed_and_restarted() -> None:
    # a 2 s probe timeout: with 0.5 s a loaded machine (this process stalled, not the engine) could make a probe
    # of a healthy engine time out, and the test would see a restart of the engine it had not frozen yet
    settings = pool_settings(1, liveness_interval_s=0.3, liveness_timeout_s=2.0)
    pool = EnginePool(settings, env=SIM_ENV)
    await pool.start()
    stopped: int | None = None
    try:
        await pool.wait_ready(60)
        # a healthy engine answers the probes: several intervals, longer than a probe's timeout, pass without a
        # restart
        await asyncio.sleep(3.0)
        assert pool.status()["engines"][0]["restarts"] == 0
        stream = pool.submit(make_query(LONG))
        stopped = pool.status()["engines"][0]["pid"]
        assert stopped is not None
        os.kill(stopped, signal.SIGSTOP)
        async with asyncio.timeout(30):
            try:
                await stream.collect()
                raise AssertionError("the frozen engine's query finished")
            except EngineDied:
                pass
        assert not pool.ready  # killed, restarting
        await pool.wait_ready(30)
        engine = pool.status()["engines"][0]
        assert engine["restarts"] == 1 and engine["state"] == "ready"
        assert "did not answer query_version" in (engine["last_error"] or "")
        assert not pid_alive(stopped)
        answer = await pool.submit(make_query({**LONG, "id": "after", "maxVisits": 10})).collect()
        assert len(answer) == 1
    finally:
        if stopped is not None and pid_alive(stopped):
            os.kill(stopped, signal.SIGKILL)
        await asyncio.wait_for(pool.close(5), 60)


async def test_a_frozen_idle_engine_takes_no_new_query() -> None:
    await check_a_frozen_engine_takes_no_new_query(pool_settings(2, **FROZEN_PROBES), SIM_ENV)
