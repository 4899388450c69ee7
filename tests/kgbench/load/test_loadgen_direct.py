"""transport=direct: the same load shape over an engine pool, without HTTP."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kgbench.load.generator import DirectTarget, LoadSettings, run_load
from kgbench.load.senders import DirectSender
from kgbench.load.traffic import QuerySource
from kgbench.targets.direct import open_pool
from kgserve.engine.errors import EngineDied, NoEngineReady
from kgserve.katago.protocol import Query
from kgserve.settings import load_settings


class FakePool:
    """submit(Query) -> async iterator of lines, like kgserve.engine.pool.EnginePool."""

    def __init__(self, mode: str = "ok", delay: float = 0.005) -> None:
        self.mode = mode
        self.delay = delay
        self.queries: list[Query] = []
        self.aborted = 0

    def submit(self, query: Query, client: str | None = None) -> AsyncIterator[bytes]:
        if self.mode == "down":
            raise NoEngineReady("0 of 1 engine(s) ready")
        self.queries.append(query)
        return self._lines(query)

    async def _lines(self, query: Query) -> AsyncIterator[bytes]:
        await asyncio.sleep(self.delay)
        if self.mode == "died":
            raise EngineDied("engine[0] exited")
        if self.mode == "hang":
            await asyncio.sleep(5)
        yield json.dumps({"id": query.caller_id, "isDuringSearch": True, "rootInfo": {"visits": 1}}).encode()
        doc = {"id": query.caller_id, "isDuringSearch": False, "rootInfo": {"visits": query.visits}}
        yield json.dumps(doc).encode()

    def abort(self, stream: Any) -> None:
        self.aborted += 1


LOAD = LoadSettings(
    concurrency=(2, 4), warmup_s=0.2, window_s=0.3, min_windows=2, max_windows=4, tolerance=0.5, max_visits=9
)


async def test_direct_levels_and_metrics() -> None:
    pool = FakePool()
    res = await run_load(DirectTarget(pool), LOAD, QuerySource.from_dirs())
    assert res.transport == "direct"
    assert [lv.concurrency for lv in res.levels] == [2, 4]
    for lv in res.levels:
        assert lv.req_per_s > 0 and lv.errors == 0
        assert lv.visits_per_s == pytest.approx(9 * lv.req_per_s)
    assert all(q.visits == 9 and q.expected_finals == 1 for q in pool.queries)
    assert len({q.caller_id for q in pool.queries}) == len(pool.queries)
    ok = [r for r in res.records if r.error is None]
    assert ok and all(r.status == 200 and r.visits == 9 and r.bytes > 50 for r in ok)


async def test_a_bare_pool_is_a_direct_target() -> None:
    pool = FakePool()
    load = LoadSettings(concurrency=(2,), warmup_s=0.1, window_s=0.2, min_windows=1, max_windows=1)
    res = await run_load(pool, load, QuerySource.from_dirs())
    assert res.transport == "direct" and pool.queries and res.levels[0].req_per_s > 0


@pytest.mark.parametrize(("mode", "kind", "status"), [("down", "unavailable", 503), ("died", "unavailable", 503)])
async def test_direct_engine_failures(mode: str, kind: str, status: int) -> None:
    out = await DirectSender(FakePool(mode), 1.0).send("x", {"moves": [], "rules": "tromp-taylor", "maxVisits": 5})
    assert (out.error, out.status) == (kind, status)


async def test_direct_timeout_aborts_the_query() -> None:
    pool = FakePool("hang")
    out = await DirectSender(pool, 0.2).send("x", {"moves": [], "rules": "tromp-taylor", "maxVisits": 5})
    assert out.error == "timeout" and pool.aborted == 1


async def test_direct_rejected_query_is_400() -> None:
    pool = FakePool()
    out = await DirectSender(pool, 1.0).send("x", {"action": "terminate_all"})
    assert (out.status, out.error) == (400, "client_error") and not pool.queries


@pytest.mark.slow
async def test_direct_against_the_sim_engine() -> None:
    settings = load_settings().with_overrides(backend="sim")
    env = {**os.environ, "KGSERVE_SIM_FIXED_RPS": "400", "KGSERVE_SIM_DEVICE": "private", "KGSERVE_SIM_STARTUP_S": "0"}
    load = LoadSettings(concurrency=(8,), warmup_s=0.5, window_s=0.5, min_windows=2, max_windows=4, tolerance=0.5)
    async with open_pool(settings, processes=1, env=env, ready_timeout_s=60) as pool:
        res = await run_load(DirectTarget(pool), load, QuerySource.from_dirs())
    lv = res.levels[0]
    assert lv.errors == 0 and 20 < lv.req_per_s <= 400 * 1.1
    assert all(r.visits == load.max_visits for r in res.records if r.error is None)
