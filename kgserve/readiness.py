"""The /readyz document: the pool's status plus what kgserve serves (backend, model, cfg, provenance).

200 when the pool says it is ready (engine.min_ready engines up); 503 otherwise, with the reason and each
engine's last stderr lines (the pool keeps engine.stderr_tail_lines of them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kgserve.context import ServeContext

__all__ = ["readiness"]


def readiness(ctx: ServeContext) -> tuple[bool, dict[str, Any]]:
    settings = ctx.settings
    backend = settings.engine.backend
    status: Mapping[str, Any]
    if ctx.pool is None:
        status = {"ready": False, "reason": "the engine pool is not running", "engines": []}
    else:
        status = ctx.pool.status()
    ready = bool(status.get("ready"))
    reason = None if ready else (status.get("reason") or "no engine is ready")
    version = status.get("katago_version")
    payload: dict[str, Any] = {
        "ready": ready,
        "reason": reason,
        "backend": backend,
        "simulated": backend == "sim" or "sim" in str(version or ""),
        "katago_version": version,
        "model": str(settings.engine.model_for(backend)),
        "cfg": str(settings.engine.cfg),
        "provenance": ctx.provenance,
        "engines": list(status.get("engines") or []),
    }
    return ready, payload
