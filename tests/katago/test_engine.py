"""kgserve's engine pool driving the real KataGo: the actions kgserve sends on its own (query_version and
query_models at start, terminate for an abort, terminate_all on close), error lines, kill -9 and restart, a frozen
engine (SIGSTOP) taking no new query.

Where a sim test holds for any engine, it runs here as is, against this module's `engine_pool` fixture.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kgserve.engine.pool import EnginePool
from tests.helpers.engine_checks import (
    FROZEN_PROBES,
    SLOW,
    check_a_frozen_engine_takes_no_new_query,
    check_abort_returns_the_partial_result,
    check_close_terminates_running_queries,
    check_engine_error_and_warning_lines_are_katagos,
    check_missing_model_crash_loop,
    check_sigkill_then_restart,
    kinds,
    make_query,
    ready_pool,
)
from tests.katago.conftest import RealKatago, tier_settings

pytestmark = pytest.mark.katago


@pytest.fixture
async def engine_pool(tmp_path: Path, real_katago: RealKatago) -> AsyncIterator[EnginePool]:
    async with ready_pool(tier_settings(tmp_path, real_katago)) as pool:
        yield pool


async def test_engine_error_and_warning_lines_are_katagos(engine_pool: EnginePool) -> None:
    await check_engine_error_and_warning_lines_are_katagos(engine_pool)


async def test_abort_returns_the_partial_result(engine_pool: EnginePool) -> None:
    await check_abort_returns_the_partial_result(engine_pool)


async def test_sigkill_then_restart(engine_pool: EnginePool) -> None:
    await check_sigkill_then_restart(engine_pool)


async def test_start_asks_the_engine_its_version_and_model(engine_pool: EnginePool, real_katago: RealKatago) -> None:
    argv = [str(real_katago.binary), "version"]
    printed = (
        await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, timeout=60, check=True)
    ).stdout
    status = engine_pool.status()
    assert status["ready"] and status["simulated"] is False
    assert f"KataGo v{status['katago_version']}\n" in printed  # query_version, as `katago version` prints it
    assert status["model"] == str(real_katago.model)  # query_models: the -model argument as given


async def test_terminate_of_a_queued_query_gives_no_results(tmp_path: Path, real_katago: RealKatago) -> None:
    """protocol/terminate_queued through kgserve's abort: one analysis thread, a busy query, a queued one."""
    pool = EnginePool(tier_settings(tmp_path, real_katago, cfg={"numAnalysisThreads": 1}))
    await pool.start()
    try:
        await pool.wait_ready(60)
        busy = pool.submit(make_query({**SLOW, "id": "busy", "maxVisits": 10_000_000}))
        queued = pool.submit(make_query({**SLOW, "id": "queued", "maxVisits": 100}))
        await asyncio.sleep(0.5)
        pool.abort(queued)
        (line,) = await asyncio.wait_for(queued.collect(), 30)
        assert json.loads(line) == {"id": "queued", "isDuringSearch": False, "noResults": True, "turnNumber": 1}
        pool.abort(busy)
        (final,) = await asyncio.wait_for(busy.collect(), 30)
        assert kinds([final]) == ["final"] and json.loads(final)["rootInfo"]["visits"] > 0
    finally:
        await asyncio.wait_for(pool.close(5), 60)


async def test_close_sends_terminate_all(tmp_path: Path, real_katago: RealKatago) -> None:
    await check_close_terminates_running_queries(EnginePool(tier_settings(tmp_path, real_katago)), 3)


async def test_missing_model_crash_loop(tmp_path: Path, real_katago: RealKatago) -> None:
    # KataGo aborts (SIGABRT) on a missing model; the simulated engine exits with status 134 instead
    await check_missing_model_crash_loop(tier_settings(tmp_path, real_katago), tmp_path / "missing.bin.gz", None, "-6")


async def test_a_frozen_idle_engine_takes_no_new_query(tmp_path: Path, real_katago: RealKatago) -> None:
    settings = tier_settings(tmp_path, real_katago, engine={"processes": 2, **FROZEN_PROBES})
    await check_a_frozen_engine_takes_no_new_query(settings, None)
