"""Load generator: closed-loop levels or open-loop Poisson arrivals against kgserve (HTTP) or an EnginePool (direct)."""

from __future__ import annotations

from kgbench.loadtypes import (
    DirectTarget,
    HttpTarget,
    LevelSummary,
    LoadResult,
    LoadSettings,
    Progress,
    ProgressUpdate,
    RequestRecord,
)
from kgbench.traffic import QuerySource

Target = str | HttpTarget | DirectTarget

__all__ = [
    "DirectTarget",
    "HttpTarget",
    "LevelSummary",
    "LoadResult",
    "LoadSettings",
    "Progress",
    "ProgressUpdate",
    "QuerySource",
    "RequestRecord",
    "Target",
    "run_load",
]


async def run_load(
    target: Target, load: LoadSettings, queries: QuerySource, progress: Progress | None = None
) -> LoadResult:
    """Run every level of ``load`` against ``target``; a str target is an HTTP base URL."""
    raise NotImplementedError("being written")
