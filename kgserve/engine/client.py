"""The engine client's contract: what kgserve's front ends (HTTP, WebSocket) and kgbench's direct sender ask of the
engines. `kgserve.engine.pool.EnginePool` implements it; tests put stand-ins in its place.

Its `status()` is the /readyz and /metrics document: `ready`, `reason`, `backend`, `katago_version`, `model`,
`simulated` and `engines` (one entry per engine process). `is_simulated` is the one rule for `simulated`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from kgserve.katago.protocol import Query

__all__ = ["SIM_BACKEND", "SIM_MARK", "EngineClient", "is_simulated"]

SIM_BACKEND = "sim"  # the backend name of the simulated engine (python -m kgserve.sim)


SIM_MARK = "SIMULATED"  # what the simulated engine's own output (stderr, `benchmark`) says


def is_simulated(backend: str | None, version: str | None = None, *, output: str | None = None) -> bool:
    """Whether figures from this engine are the simulated engine's: the `sim` backend, a version that says so (the
    sim's version string ends in `-sim`, whatever backend name launched it), or its own output saying SIMULATED."""
    return backend == SIM_BACKEND or "sim" in (version or "") or (output is not None and SIM_MARK in output)


class EngineClient(Protocol):
    """The engines behind kgserve: started by the app's lifespan, closed at its end, and in between given
    queries (`submit` returns the query's response lines, `abort` ends one early) and asked for `status`."""

    async def start(self) -> None: ...

    def submit(self, query: Query, client: str | None = None) -> AsyncIterator[bytes]: ...

    def abort(self, stream: Any, turns: frozenset[int] | None = None) -> None: ...

    def status(self) -> Mapping[str, Any]: ...

    async def close(self, grace_s: float) -> None: ...
