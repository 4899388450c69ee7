"""transport=direct for a job: the same engines, cfg, queries and load shape as over HTTP, but through kgserve's
EnginePool in this process (kgbench.load.direct sends the queries), so `overhead = 1 - reqs_http / reqs_direct`
shows what the serving layer costs. The engines' stderr (logged by kgserve.engine as `engine[i] stderr: ...`)
goes to kgserve_stderr.log in the job dir, read for `NN rows`/`NN batches` and `Unused key` like the HTTP path.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgbench.load.types import LoadResult, LoadSettings
from kgbench.sweep.progress import JobProgress
from kgbench.targets.kgserve_process import MAX_LINES, JobFailure, find_unused_keys, parse_nn_stats
from kgbench.track.gpu import GpuSampler
from kgbench.track.tracking import JobRun

if TYPE_CHECKING:
    from kgbench.sweep.job import Prepared

__all__ = ["via_direct"]


class _LineCollector(logging.Handler):
    """Keeps the `engine[i] ...` log lines (and writes them to a file)."""

    def __init__(self, path: Path) -> None:
        super().__init__(level=logging.INFO)
        self.lines: deque[str] = deque(maxlen=MAX_LINES)  # the tail; the whole log is in the file
        self._file = path.open("w", encoding="utf-8")

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = record.getMessage()
        except Exception:
            return
        self.lines.append(line)
        self._file.write(line + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()
        super().close()

    def text(self) -> str:
        return "\n".join(self.lines)


async def _wait_ready(pool: Any, timeout_s: float, collector: _LineCollector, progress: JobProgress) -> float:
    from kgserve.pool import NoEngineReady

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
            raise JobFailure(f"the engine warned 'Unused key' for {', '.join(map(repr, unused))}: KataGo ignored it")
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
    prepared: Prepared, load: LoadSettings, collector: _LineCollector, run: JobRun, progress: JobProgress
) -> tuple[LoadResult, dict[str, float]]:
    from kgbench.load.direct import run_direct
    from kgbench.load.traffic import QuerySource
    from kgserve.pool import EnginePool

    settings = prepared.settings
    timeout = settings.engine.backend_settings(prepared.backend).startup_timeout_s * prepared.engines + 60
    pool = EnginePool(settings, prepared.backend)
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
        queries = QuerySource.from_dirs(seed=load.seed)
        with GpuSampler() as gpu:
            result = await run_direct(pool, load, queries, progress.update)
        extra.update(gpu.metrics())
    finally:
        progress.stage("stopping the engines")
        await pool.close(settings.server.grace_period_s)
    return result, extra


def via_direct(
    prepared: Prepared, load: LoadSettings, job_dir: Path, run: JobRun, progress: JobProgress
) -> tuple[LoadResult, dict[str, float]]:
    from kgbench.sweep.modes import log_load_result

    collector = _LineCollector(job_dir / "kgserve_stderr.log")
    logger = logging.getLogger("kgserve.engine")
    previous_level, previous_propagate = logger.level, logger.propagate
    logger.addHandler(collector)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # the engines' stderr goes to the file, not the terminal
    progress.stage(f"starting {prepared.engines} {prepared.backend} engine(s) in-process (transport=direct)")
    try:
        result, extra = asyncio.run(_run(prepared, load, collector, run, progress))
    finally:
        logger.removeHandler(collector)
        logger.setLevel(previous_level)
        logger.propagate = previous_propagate
        collector.close()
    extra.update(parse_nn_stats(collector.text()))
    if unused := find_unused_keys(collector.text()):
        log_load_result(run, result, extra, job_dir, "")
        raise JobFailure(f"the engine warned 'Unused key' for {', '.join(map(repr, unused))}: KataGo ignored it")
    return result, extra
