"""The measuring half of `python -m kgbench.promote --verify` (kgbench.decide.verify): `python -m kgserve --config
CONFIG --port 0` started and made ready, one level of the job's load sent through it while the host and device are
watched for other work, kgserve stopped; what the verdict needs in a `Served`."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgbench.load.generator import DRAIN_S, run_load
from kgbench.load.interval import Interval
from kgbench.load.kinds import build_traffic
from kgbench.load.types import HttpTarget, LoadResult, LoadSettings
from kgbench.targets.kgserve_process import KgserveProcess
from kgbench.track.contention import ContentionSettings
from kgbench.track.measure import MeasureWatch
from kgbench.track.sampling.devprocs import backend_device
from kgserve.settings import Settings

__all__ = ["Served", "serve_and_load"]


@dataclass(frozen=True)
class Served:
    interval: Interval  # req/s served, with its 95% interval over the windows
    p99_ms: float
    errors: dict[str, int] = field(default_factory=dict)  # failed requests by kind (kgbench.load.types)
    restarts: int = 0  # engine restarts seen on /readyz after the load
    contention: str = ""  # other work on the machine during the windows ("" when none was seen)
    ready: Mapping[str, Any] = field(default_factory=dict)  # /readyz when it became ready
    failure: str = ""  # kgserve did not start or the load could not run: why


def _bound_s(load: LoadSettings) -> float:
    """The longest the one level may take: warmup (and a first round), its windows, the drain."""
    return load.warmup_s + load.request_timeout_s + load.max_windows * load.window_s + DRAIN_S + 30.0


def _served(result: LoadResult, ready: Mapping[str, Any], after: Mapping[str, Any], contention: str) -> Served:
    head = result.headline()
    errors: dict[str, int] = {}
    for level in result.levels:
        for kind, count in level.errors_by_kind.items():
            errors[kind] = errors.get(kind, 0) + count
    restarts = sum(int(e.get("restarts") or 0) for e in after.get("engines") or [])
    restarts -= sum(int(e.get("restarts") or 0) for e in ready.get("engines") or [])
    if head is None:
        return Served(Interval.point(0.0), float("nan"), errors, restarts, contention, ready)
    interval = Interval(head.req_per_s, head.req_per_s_low, head.req_per_s_high, len(head.window_req_per_s))
    return Served(interval, head.p99_ms, errors, restarts, contention, ready)


def serve_and_load(
    config: Path, settings: Settings, load: LoadSettings, log_path: Path, env: Mapping[str, str] | None = None
) -> Served:
    """kgserve from `config` (whose settings are `settings`; `env` added to its environment), ready, under `load`;
    stopped on the way out."""
    proc = KgserveProcess(config, log_path, env)
    engine = settings.engine
    try:
        proc.start()
        _, ready = proc.wait_ready(engine.backend_settings().startup_timeout_s * engine.processes + 60)
        assert proc.url is not None
        queries = build_traffic(load)  # the job's own traffic (distinct, review, batch...), its own seed
        frontend = lambda: proc.proc.pid if proc.proc is not None else None  # noqa: E731
        with MeasureWatch(frontend_pid=frontend, device=backend_device(engine.backend)) as watch:
            result = asyncio.run(asyncio.wait_for(run_load(HttpTarget(proc.url), load, queries), _bound_s(load)))
        _, after = proc.get_json("/readyz")
        verdict = watch.contention(result, load.window_s, ContentionSettings())
    except Exception as exc:  # TargetError (kgserve did not start), TimeoutError, a load that broke
        text = " ".join(str(exc).split()) or type(exc).__name__
        return Served(Interval.point(0.0), float("nan"), failure=f"{type(exc).__name__}: {text}")
    finally:
        proc.stop(settings.server.grace_period_s)
    return _served(result, ready, after, verdict.reason if verdict.flagged else "")
