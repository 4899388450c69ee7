"""kgserve's EnginePool in this process, as a load target (transport=direct and the benchmark scripts)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping

from kgserve.engine.pool import EnginePool
from kgserve.settings import Settings

__all__ = ["open_pool"]


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
