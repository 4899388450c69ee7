"""transport=direct: the same load shape and metrics as HTTP, but straight into kgserve's EnginePool (no HTTP).

Each request does what kgserve's intake does for one query (encode the JSON, ``classify_line``), then
``pool.submit(query)`` and reads the QueryStream to its end. Status codes mirror kgserve's: 200 answered,
400 rejected by the protocol, 503 no engine ready / engine died.

``open_pool(settings, processes=..., env=...)`` starts a pool and waits until it is ready (used by the benchmark
scripts; kgbench's job runner may build its own pool and pass ``DirectTarget(pool)`` to ``run_load``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from kgbench.load.generator import run_levels
from kgbench.load.responses import Outcome, final_visits
from kgbench.load.traffic import QuerySource
from kgbench.load.types import LoadResult, LoadSettings, Progress
from kgserve.engine import EngineError
from kgserve.pool import EnginePool
from kgserve.protocol import Rejected, classify_line
from kgserve.settings import Settings

__all__ = ["DirectSender", "open_pool", "run_direct"]


class DirectSender:
    """Sender over an EnginePool (or anything with ``submit(Query) -> async iterator of bytes`` and ``abort``)."""

    def __init__(self, pool: Any, timeout_s: float) -> None:
        self.pool = pool
        self.timeout_s = timeout_s

    async def send(self, req_id: str, body: dict[str, Any]) -> Outcome:
        line = json.dumps({"id": req_id, **body}, separators=(",", ":")).encode()
        query = classify_line(line)
        if isinstance(query, Rejected):
            return Outcome(400, len(query.error_line) + 1, None, "client_error")
        try:
            stream = self.pool.submit(query)
        except EngineError:
            return Outcome(503, 0, None, "unavailable")
        lines: list[bytes] = []
        try:
            async with asyncio.timeout(self.timeout_s):
                async for item in stream:
                    lines.append(item)
        except TimeoutError:
            with contextlib.suppress(Exception):
                self.pool.abort(stream)
            return Outcome(0, sum(len(x) + 1 for x in lines), None, "timeout")
        except EngineError:
            return Outcome(503, sum(len(x) + 1 for x in lines), None, "unavailable")
        visits, kind = final_visits(lines)
        return Outcome(200, sum(len(x) + 1 for x in lines), visits, kind)


async def run_direct(
    pool: Any, load: LoadSettings, queries: QuerySource, progress: Progress | None = None
) -> LoadResult:
    """Same as ``run_load(DirectTarget(pool), ...)``."""
    return await run_levels(DirectSender(pool, load.request_timeout_s), "direct", load, queries, progress)


@contextlib.asynccontextmanager
async def open_pool(
    settings: Settings,
    *,
    backend: str | None = None,
    processes: int | None = None,
    env: Mapping[str, str] | None = None,
    ready_timeout_s: float = 120.0,
) -> AsyncIterator[EnginePool]:
    """A started, ready EnginePool (``processes`` overrides ``engine.processes``); closed on exit."""
    if processes is not None:
        settings = settings.model_copy(
            update={"engine": settings.engine.model_copy(update={"processes": processes, "min_ready": None})}
        )
    pool = EnginePool(settings, backend, env=env)
    await pool.start()
    try:
        await pool.wait_ready(ready_timeout_s)
        yield pool
    finally:
        await pool.close(5.0)
