"""transport=direct for a job: the same engines, cfg, queries and load shape as over HTTP, but through kgserve's
EnginePool in this process (kgbench.load.senders.DirectSender sends the queries), so `overhead = 1 - reqs_http /
reqs_direct` shows what the serving layer costs. The engines' stderr (the pool's stderr sink, written as
`engine[i] stderr: ...`) goes to kgserve_stderr.log in the job dir, read for `NN rows`/`NN batches` and
`Unused key` like the HTTP path.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from pathlib import Path
from typing import Any

from kgbench.load.generator import run_direct
from kgbench.load.traffic import QuerySource
from kgbench.load.types import LevelHook, LoadResult, LoadSettings
from kgbench.sweep.device import watch_figures
from kgbench.sweep.progress import JobProgress
from kgbench.sweep.spec import Prepared
from kgbench.targets.kgserve_process import MAX_LINES, JobFailure, find_unused_keys, parse_nn_stats, unused_key_reason
from kgbench.track.measure import MeasureWatch
from kgbench.track.tracking import JobRun
from kgserve.engine_errors import NoEngineReady
from kgserve.pool import EnginePool

__all__ = ["via_direct"]


class _LineCollector:
    """The pool's stderr sink: keeps the engines' lines as `engine[i] stderr: <line>` (the form kgserve logs
    them in, which parse_nn_stats reads) and writes them to a file."""

    def __init__(self, path: Path) -> None:
        self.lines: deque[str] = deque(maxlen=MAX_LINES)  # the tail; the whole log is in the file
        self._file = path.open("w", encoding="utf-8")

    def __call__(self, label: str, text: str) -> None:
        line = f"{label} stderr: {text}"
        self.lines.append(line)
        self._file.write(line + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def text(self) -> str:
        return "\n".join(self.lines)


async def _wait_ready(pool: Any, timeout_s: float, collector: _LineCollector, progress: JobProgress) -> float:
    started = time.monotonic()
    next_note = 30.0
    while True:
        try:
            await pool.wait_ready(1.0)
            return time.monotonic() - started
        except NoEngineReady:
            pass
        elapsed = time.monotonic() - started
        if unused := find_unused_keys(collector.text()):
            raise JobFailure(unused_key_reason(unused))
        status = pool.status()
        engines = status.get("engines") or []
        if any((e.get("restarts") or 0) >= 2 and e.get("state") != "ready" for e in engines):
            last = engines[0].get("last_error") or status.get("reason")
            raise JobFailure(f"engine failed to start: {last}")
        if elapsed > timeout_s:
            raise JobFailure(f"engines not ready within {timeout_s:g} s (startup_timeout_s): {status.get('reason')}")
        if elapsed >= next_note:
            next_note += 30.0
            progress.stage(f"still starting after {elapsed:.0f} s ({status.get('reason')})")


async def _run(
    prepared: Prepared,
    load: LoadSettings,
    queries: QuerySource,
    collector: _LineCollector,
    run: JobRun,
    progress: JobProgress,
    on_level: LevelHook | None,
) -> tuple[LoadResult, dict[str, float], MeasureWatch]:
    settings = prepared.settings
    timeout = settings.engine.backend_settings(prepared.backend).startup_timeout_s * prepared.engines + 60
    pool = EnginePool(settings, prepared.backend, stderr_sink=collector)
    extra: dict[str, float] = {}
    await pool.start()
    try:
        start_s = await _wait_ready(pool, timeout, collector, progress)
        extra["engine_start_s"] = start_s
        run.log_metrics({"engine_start_s": start_s})
        status = pool.status()
        tags = {"simulated": "true" if status.get("simulated") else "false"}
        if status.get("katago_version"):
            tags["katago_version"] = str(status["katago_version"])
        run.set_tags(tags)
        progress.stage(f"{prepared.engines} engine(s) ready after {start_s:.1f} s; measuring (direct pipe)")
        # no front-end process: the engines are this process's children, counted as engines by the host sampler
        with MeasureWatch() as watch:
            result = await run_direct(pool, load, queries, progress.update, on_level)
    finally:
        progress.stage("stopping the engines")
        await pool.close(settings.server.grace_period_s)
    return result, extra, watch


def via_direct(
    prepared: Prepared,
    load: LoadSettings,
    queries: QuerySource,
    job_dir: Path,
    run: JobRun,
    progress: JobProgress,
    on_level: LevelHook | None = None,
) -> tuple[LoadResult, dict[str, float], str | None]:
    """The engines in this process under the load generator: (result, extra metrics, `Unused key` failure or None)."""
    collector = _LineCollector(job_dir / "kgserve_stderr.log")  # the engines' stderr: the file, not the terminal
    progress.stage(f"starting {prepared.engines} {prepared.backend} engine(s) in-process (transport=direct)")
    try:
        result, extra, watch = asyncio.run(_run(prepared, load, queries, collector, run, progress, on_level))
    finally:
        collector.close()
    extra.update(parse_nn_stats(collector.text()))
    figures, tags = watch_figures(prepared, watch, result, extra, job_dir)
    extra.update(figures)
    run.set_tags(tags)
    unused = find_unused_keys(collector.text())
    return result, extra, unused_key_reason(unused) if unused else None
