"""Issue 36 item 5: kgserve's dispatch work per answer does not grow with the number of clients holding queries.
1,488 queries through the thread reserve (a scripted engine of 16 threads that answers at once), from 24 clients and
from 1,488: the Python calls made in kgserve.engine per answer (functions and builtins, counted with sys.setprofile:
operations, not time) stay within a constant of each other. Before issue 36 each answer sorted every waiting
client's next query: ~1,500 calls an answer more at 1,488 clients than at 24."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import kgserve.engine
from kgserve.engine.pool import EnginePool
from tests.conftest import serving_cfg_with_threads
from tests.helpers.engine_checks import make_query

from .conftest import fake_argv, pool_settings

pytestmark = pytest.mark.slow

QUERIES = 1488
ENGINE_CODE = str(Path(kgserve.engine.__file__).parent)


def _counter() -> tuple[Callable[[FrameType, str, Any], None], list[int]]:
    count = [0]

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event in ("call", "c_call") and frame.f_code.co_filename.startswith(ENGINE_CODE):
            count[0] += 1

    return profile, count


async def _calls_per_answer(cfg: Path, model: Path, clients: int) -> float:
    settings = pool_settings(1, cfg=cfg, thread_reserve=1 / 16)
    env = {key: value for key, value in os.environ.items() if not key.startswith("FAKE_")}
    pool = EnginePool(settings, env=env, spec_overrides={"argv": fake_argv(model), "startup_timeout_s": 30.0})
    await pool.start()
    try:
        await pool.wait_ready(60)
        profile, count = _counter()
        sys.setprofile(profile)
        try:
            streams = [
                pool.submit(make_query({"id": f"q{index}", "moves": [], "maxVisits": 10}), f"10.1.{index % clients}")
                for index in range(QUERIES)
            ]
            await asyncio.wait_for(asyncio.gather(*(stream.collect() for stream in streams)), 120)
        finally:
            sys.setprofile(None)
        return count[0] / QUERIES
    finally:
        await pool.close(5)


async def test_dispatch_work_per_answer_does_not_grow_with_the_clients(tmp_path: Path, model_file: Path) -> None:
    cfg = serving_cfg_with_threads(tmp_path, 16)
    few = await _calls_per_answer(cfg, model_file, 24)
    crowd = await _calls_per_answer(cfg, model_file, QUERIES)
    assert crowd <= 1.5 * few + 20, f"{crowd:.0f} calls per answer at {QUERIES} clients, {few:.0f} at 24"
