"""The /readyz document: the pool's status plus what kgserve serves (backend, model, cfg, provenance).

200 when the pool says it is ready (engine.min_ready engines up); 503 otherwise, with the reason and each
engine's last stderr lines (the pool keeps engine.stderr_tail_lines of them). Not `detailed` (a caller
without the bearer token, when one is configured): no stderr lines and no engine error texts, which can
quote other clients' queries; the reason is cut to the pool's own words. `degraded`: some engine does not take
queries now (frozen, restarting), whether or not enough others do for `ready`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kgserve.context import ServeContext
from kgserve.engine.client import is_simulated
from kgserve.katago.cfg import cfg_analysis_threads
from kgserve.katago.netfile import is_synthetic_model
from kgserve.settings import Settings

__all__ = ["client_limits", "readiness"]


_ENGINE_WORDS = ("last_stderr", "last_error")


def _redacted(engine: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in engine.items() if key not in _ENGINE_WORDS}


def client_limits(settings: Settings) -> dict[str, int]:
    limits = settings.limits
    return {
        "max_inflight_queries": limits.max_inflight_queries,
        "max_inflight_per_client": limits.max_inflight_per_client,
        "max_connections_per_client": limits.max_connections_per_client,
        "max_queries_per_request": limits.max_queries_per_request,
    }


def readiness(ctx: ServeContext, *, detailed: bool = True) -> tuple[bool, dict[str, Any]]:
    settings = ctx.settings
    backend = settings.engine.backend
    status: Mapping[str, Any]
    if ctx.pool is None:
        status = {"ready": False, "reason": "the engine pool is not running", "engines": []}
    else:
        status = ctx.pool.status()
    ready = bool(status.get("ready"))
    degraded = bool(status.get("degraded"))
    reason = status.get("reason") if ready else str(status.get("reason") or "no engine is ready")
    engines = [dict(engine) for engine in status.get("engines") or []]
    if not detailed:
        reason = reason.split("; ", 1)[0] if reason is not None else None
        engines = [_redacted(engine) for engine in engines]
    version = status.get("katago_version")
    payload: dict[str, Any] = {
        "ready": ready,
        "degraded": degraded,  # some engine is not serving (frozen, restarting): ready can still be true
        "reason": reason,
        "backend": backend,
        "simulated": is_simulated(backend, None if version is None else str(version)),
        "katago_version": version,
        "model": str(settings.engine.model_for(backend)),
        # a synthetic net (random weights) is served only as a throughput test: its analyses are noise
        "synthetic_net": is_synthetic_model(settings.engine.model_for(backend)),
        "throughput_test": settings.engine.throughput_test,
        "cfg": ctx.cfg_source or str(settings.engine.cfg),
        # what every engine runs, first start and restarts: kgserve's copy of the cfg as it started (servedcfg)
        **{key: ctx.cfg_served.get(key) for key in ("cfg_sha256", "cfg_run_id", "cfg_kept")},
        "provenance": ctx.provenance,
        "engines": engines,
        # what a bulk client sizes its work from (python -m kgserve.batch): threads per engine, and its limits
        "analysis_threads": cfg_analysis_threads(settings.engine.cfg),
        "client_limits": client_limits(settings),
    }
    return ready, payload
