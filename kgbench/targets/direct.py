"""kgserve's EnginePool in this process, as a load target: `transport=direct` for a job (`PoolTarget`), and
`open_pool` for the benchmarks and tests. The same engines, cfg, queries and load shape as over HTTP, without the
serving layer, so `overhead = 1 - reqs_http / reqs_direct` shows what the serving layer costs.

The engines' stderr (the pool's stderr sink) is kept as kgserve would log it (kgserve.engine.process.stderr_line)
and written to a file: kgbench.targets.enginelog reads it as it reads kgserve's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from kgbench.load.generator import run_direct
from kgbench.load.kinds import Traffic
from kgbench.load.types import LevelHook, LoadResult, LoadSettings, Progress
from kgbench.targets.base import Note, TargetError
from kgbench.targets.enginelog import MAX_LINES, find_unused_keys, unused_key_reason
from kgbench.targets.faults import Fault, restart_faults
from kgserve.engine.errors import NoEngineReady
from kgserve.engine.pool import EnginePool
from kgserve.engine.process import stderr_line
from kgserve.settings import Settings

__all__ = ["PoolTarget", "open_pool"]


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


class _LineCollector:
    """The pool's stderr sink: keeps the engines' lines as kgserve logs them and writes them to a file."""

    def __init__(self, path: Path) -> None:
        self.lines: deque[str] = deque(maxlen=MAX_LINES)  # the tail; the whole log is in the file
        self._file = path.open("w", encoding="utf-8")

    def __call__(self, label: str, text: str) -> None:
        line = stderr_line(label, text)
        self.lines.append(line)
        self._file.write(line + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def text(self) -> str:
        return "\n".join(self.lines)


class PoolTarget:
    """The job's engines in this process, behind kgserve's EnginePool; one event loop from start to stop."""

    name = "the engines"
    where = "the direct pipe"

    def __init__(self, settings: Settings, backend: str, log_path: Path) -> None:
        self.collector = _LineCollector(log_path)
        self.pool = EnginePool(settings, backend, stderr_sink=self.collector)
        self.grace_s = settings.server.grace_period_s
        self._runner = asyncio.Runner()
        self._faults: list[Fault] = []

    def start(self, timeout_s: float, note: Note) -> tuple[float, Mapping[str, Any]]:
        return self._runner.run(self._start(timeout_s, note))

    async def _start(self, timeout_s: float, note: Note) -> tuple[float, Mapping[str, Any]]:
        """Wait for the pool, failing early on an `Unused key` warning or an engine that keeps failing to start."""
        await self.pool.start()
        started = time.monotonic()
        next_note = 30.0
        while True:
            try:
                await self.pool.wait_ready(1.0)
                return time.monotonic() - started, self.pool.status()
            except NoEngineReady:
                pass
            elapsed = time.monotonic() - started
            if unused := find_unused_keys(self.collector.text()):
                raise TargetError(unused_key_reason(unused))
            status = self.pool.status()
            engines = status.get("engines") or []
            if any((e.get("restarts") or 0) >= 2 and e.get("state") != "ready" for e in engines):
                raise TargetError(f"engine failed to start: {engines[0].get('last_error') or status.get('reason')}")
            if elapsed > timeout_s:
                raise TargetError(
                    f"engines not ready within {timeout_s:g} s (startup_timeout_s): {status.get('reason')}"
                )
            if elapsed >= next_note:
                next_note += 30.0
                note(f"still starting after {elapsed:.0f} s ({status.get('reason')})")

    def measure(
        self, load: LoadSettings, queries: Traffic, progress: Progress | None, on_level: LevelHook | None
    ) -> LoadResult:
        before = self.pool.status()
        result = self._runner.run(run_direct(self.pool, load, queries, progress, on_level))
        self._faults = restart_faults(before, self.pool.status())
        return result

    def faults(self) -> list[Fault]:
        return list(self._faults)

    def stop(self, grace_s: float) -> None:
        try:
            self._runner.run(self.pool.close(grace_s))
        finally:
            self._runner.close()
            self.collector.close()

    def engine_log(self) -> str:
        return self.collector.text()

    def frontend_pid(self) -> int | None:
        return None  # no front-end process: the engines are this process's children (the host sampler's engines)
