"""N supervised engine processes behind one kgserve (settings.engine.processes).

- `EnginePool(settings, backend=None)`; `await pool.start()` returns at once: engines start one after
  another in the background (kgserve serves /healthz and /readyz meanwhile). `await pool.wait_ready()`
  waits for `engine.required_ready` of them (kgbench's transport=direct uses this).
- Each engine is supervised: when it exits, every pending stream of it fails at once with EngineDied
  (kgserve.engine), and a new process is started after a backoff that doubles from
  `restart_backoff_initial_s` up to `restart_backoff_max_s` (reset after a long healthy run). A crash
  loop (e.g. a missing model) keeps retrying with that backoff, never busy-looping, and keeps the last
  stderr lines for /readyz.
- `submit(query)` picks the ready engine with the least outstanding visits (requested visits x turns
  of unfinished queries) and returns its QueryStream; `NoEngineReady` (with the reason) when none is.
  `abort(stream)` terminates that query on its engine.
- `status()`: the /readyz data: ready, reason, required_ready, katago_version, model, simulated and
  engines[] (index, state starting|ready|restarting|failed|stopped, pid, restarts, start_s,
  last_stderr, last_error, outstanding_visits, pending, and per-engine counters for /metrics).
- `await pool.close(grace_s)`: every engine closes (terminate_all, stdin closed, wait, SIGTERM, SIGKILL).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from kgserve.engine.engine import Engine, EngineSpec
from kgserve.engine.errors import EngineStartupError, NoEngineReady
from kgserve.engine.stream import QueryStream
from kgserve.katago.cfg import CfgParseError, read_cfg
from kgserve.katago.protocol import Query
from kgserve.settings import Settings

__all__ = ["EnginePool", "cfg_max_visits", "engine_argv"]

log = logging.getLogger("kgserve.engine")
HEALTHY_RUN_S = 60.0  # an engine that ran this long before dying restarts with the initial backoff
FALLBACK_VISITS = 500


def engine_argv(settings: Settings, backend: str | None = None) -> list[str]:
    engine = settings.engine
    model = engine.model_for(backend)
    return [*engine.argv_prefix(backend), "analysis", "-config", str(engine.cfg), "-model", str(model)]


def cfg_max_visits(cfg: Path) -> int | None:
    """The `maxVisits` of a KataGo cfg (what a query without maxVisits costs), if the file says."""
    try:
        return int(read_cfg(cfg)["maxVisits"])
    except (OSError, CfgParseError, KeyError, ValueError):  # unreadable, no maxVisits, or not a number
        return None


@dataclass
class _Slot:
    index: int
    state: str = "starting"
    engine: Engine | None = None
    restarts: int = 0
    start_s: float | None = None
    last_stderr: list[str] = field(default_factory=list)
    last_error: str | None = None
    totals: dict[str, int] = field(default_factory=dict)  # counters of this slot's previous engines
    first_attempt: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class EnginePool:
    def __init__(
        self,
        settings: Settings,
        backend: str | None = None,
        *,
        env: Mapping[str, str] | None = None,
        spec_overrides: Mapping[str, Any] | None = None,
        stderr_sink: Callable[[str, str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.backend = backend or settings.engine.backend
        self.env = env
        self.stderr_sink = stderr_sink  # every engine's stderr lines (label, line), instead of the log
        self.spec_overrides = dict(spec_overrides or {})
        self.argv = engine_argv(settings, self.backend)
        self.default_visits = cfg_max_visits(settings.engine.cfg) or FALLBACK_VISITS
        self.required_ready = settings.engine.required_ready
        self.katago_version: str | None = None
        self.model: str | None = None
        self.katago_git_hash: str | None = None
        self._slots = [_Slot(index) for index in range(settings.engine.processes)]
        self._closing = False
        self._wake = asyncio.Event()
        self._started = False

    # -- lifecycle -----------------------------------------------------------------------------------
    def engine_spec(self, index: int) -> EngineSpec:
        engine = self.settings.engine
        values: dict[str, Any] = {
            "argv": list(self.argv),
            "env": self.env,
            "startup_timeout_s": engine.backend_settings(self.backend).startup_timeout_s,
            "label": f"engine[{index}]",
            "stderr_tail_lines": engine.stderr_tail_lines,
            "default_visits": self.default_visits,
            "stderr_sink": self.stderr_sink,
        }
        values.update(self.spec_overrides)
        return EngineSpec(**values)

    async def start(self) -> None:
        """Start supervising (engines start one after another, in the background)."""
        if self._started:
            return
        self._started = True
        previous: _Slot | None = None
        for slot in self._slots:
            slot.task = asyncio.create_task(self._supervise(slot, previous), name=f"kgserve-engine-{slot.index}")
            previous = slot

    async def __aenter__(self) -> EnginePool:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close(self.settings.server.grace_period_s)

    async def wait_ready(self, timeout_s: float | None = None, count: int | None = None) -> None:
        """Wait until `count` (default: required_ready) engines are ready; NoEngineReady on timeout."""
        wanted = count or self.required_ready
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self.ready_count < wanted:
            if self._closing:
                raise NoEngineReady("the engine pool is closed")
            if deadline is not None and time.monotonic() >= deadline:
                raise NoEngineReady(f"not ready after {timeout_s:g}s: {self._reason()}")
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                await asyncio.wait_for(self._wake.wait(), remaining)

    def _changed(self) -> None:
        self._wake.set()

    async def _sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)  # close() cancels the supervisor, which ends any sleep at once

    async def _supervise(self, slot: _Slot, previous: _Slot | None) -> None:
        if previous is not None:
            await previous.first_attempt.wait()
        initial = self.settings.engine.restart_backoff_initial_s
        backoff = initial
        while not self._closing:
            engine = Engine(self.engine_spec(slot.index), slot.index)
            slot.engine = engine
            self._changed()
            try:
                await engine.start()
            except Exception as exc:  # EngineStartupError, or anything unexpected: retry all the same
                if not isinstance(exc, EngineStartupError):
                    log.exception("%s: unexpected start-up failure", engine.label)
                    await engine.close(0.0)
                slot.first_attempt.set()
                tail = exc.stderr_tail if isinstance(exc, EngineStartupError) else list(engine.stderr_tail)
                self._retire(slot, engine, str(exc) or type(exc).__name__, tail)
                slot.state = "failed"
                log.warning("%s failed to start: %s; retrying in %.1fs", engine.label, exc, backoff)
            else:
                slot.first_attempt.set()
                slot.state = "ready"
                slot.start_s = engine.start_s
                self.katago_version = engine.version
                self.model = engine.model
                self.katago_git_hash = engine.git_hash
                self._changed()
                began = time.monotonic()
                frozen = await self._watch_liveness(slot, engine)
                if self._closing:
                    break
                if time.monotonic() - began >= max(HEALTHY_RUN_S, self.settings.engine.restart_backoff_max_s):
                    backoff = initial
                how = frozen or f"exited with status {engine.returncode}"
                self._retire(slot, engine, f"{engine.label} {how}", list(engine.stderr_tail))
                slot.state = "restarting"
                log.warning("%s %s; restarting in %.1fs", engine.label, how, backoff)
            self._changed()
            await self._sleep(backoff)
            backoff = min(backoff * 2, self.settings.engine.restart_backoff_max_s)
            slot.restarts += 1
            slot.state = "restarting"
        slot.state = "stopped"
        self._changed()

    async def _watch_liveness(self, slot: _Slot, engine: Engine) -> str | None:
        """Wait for the engine to exit; every engine.liveness_interval_s ask it query_version, and kill it
        if it does not answer within engine.liveness_timeout_s (the supervisor then restarts it).
        Returns why it was killed, or None when it exited by itself."""
        interval = self.settings.engine.liveness_interval_s
        timeout = self.settings.engine.liveness_timeout_s
        while not engine.exited:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(engine.wait(), interval)
            if engine.exited or self._closing:
                break
            if not await engine.probe(timeout):
                if engine.exited or self._closing:
                    break
                log.warning(
                    "%s did not answer query_version within %gs (frozen?): killing it (engine.liveness_timeout_s)",
                    engine.label,
                    timeout,
                )
                slot.state = "restarting"  # not ready from now on: no new query goes to it
                self._changed()
                await engine.kill()
                return f"did not answer query_version within {timeout:g}s and was killed"
        await engine.wait()
        return None

    def _retire(self, slot: _Slot, engine: Engine, error: str, tail: list[str]) -> None:
        slot.last_error = error
        if tail:
            slot.last_stderr = tail
        for key, value in engine.counters.items():
            slot.totals[key] = slot.totals.get(key, 0) + value
        engine.counters = {key: 0 for key in engine.counters}

    async def close(self, grace_s: float = 5.0) -> None:
        """Close every engine (terminate_all, stdin closed, wait grace_s, SIGTERM, SIGKILL)."""
        self._closing = True
        self._changed()
        engines = [slot.engine for slot in self._slots if slot.engine is not None and slot.state == "ready"]
        await asyncio.gather(*(engine.close(grace_s) for engine in engines), return_exceptions=True)
        tasks = [slot.task for slot in self._slots if slot.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for slot in self._slots:
            if slot.engine is not None and not slot.engine.exited:
                await slot.engine.close(0.0)
            slot.state = "stopped"

    # -- queries -------------------------------------------------------------------------------------
    @property
    def ready_engines(self) -> list[Engine]:
        return [
            slot.engine
            for slot in self._slots
            if slot.state == "ready" and slot.engine is not None and slot.engine.state == "ready"
        ]

    @property
    def ready_count(self) -> int:
        return len(self.ready_engines)

    @property
    def ready(self) -> bool:
        return not self._closing and self.ready_count >= self.required_ready

    def submit(self, query: Query) -> QueryStream:
        """Send the query to the ready engine with the least outstanding visits."""
        if self._closing:
            raise NoEngineReady("kgserve is shutting down")
        engines = self.ready_engines
        if not engines:
            raise NoEngineReady(self._reason())
        engine = min(engines, key=lambda item: (item.outstanding_visits, item.pending, item.index))
        return engine.submit(query)

    def abort(self, stream: QueryStream, turns: list[int] | None = None) -> None:
        stream.engine.abort(stream, turns)

    # -- status --------------------------------------------------------------------------------------
    def _reason(self) -> str:
        if self._closing:
            return "the engine pool is closed"
        ready = self.ready_count
        total = len(self._slots)
        reason = f"{ready} of {total} engine(s) ready, {self.required_ready} required"
        errors = [slot.last_error for slot in self._slots if slot.state != "ready" and slot.last_error]
        if errors:
            reason += f"; {errors[-1]}"
        elif not self._started:
            reason += "; the pool was not started"
        return reason

    def status(self) -> dict[str, Any]:
        ready = self.ready
        version = self.katago_version
        return {
            "ready": ready,
            "reason": None if ready else self._reason(),
            "required_ready": self.required_ready,
            "backend": self.backend,
            "katago_version": version,
            "model": self.model,
            "simulated": "sim" in (version or "") or self.backend == "sim",
            "engines": [self._engine_status(slot) for slot in self._slots],
        }

    def _engine_status(self, slot: _Slot) -> dict[str, Any]:
        engine = slot.engine
        live = engine is not None and not engine.exited
        # a start in progress shows the last failure's lines until it has finished (or has lines of its own)
        settled = engine is not None and (engine.exited or slot.state == "ready")
        own = list(engine.stderr_tail) if engine is not None else []
        tail = own if settled or not slot.last_stderr else slot.last_stderr
        counters = dict(slot.totals)
        if engine is not None:
            for key, value in engine.counters.items():
                counters[key] = counters.get(key, 0) + value
        return {
            "index": slot.index,
            "state": "restarting"
            if slot.state == "ready" and engine is not None and engine.state == "exited"
            else slot.state,
            "pid": engine.pid if engine is not None and live else None,
            "restarts": slot.restarts,
            "start_s": slot.start_s,
            "last_stderr": tail,
            "last_error": slot.last_error,
            "outstanding_visits": engine.outstanding_visits if engine is not None and live else 0,
            "pending": engine.pending if engine is not None and live else 0,
            "counters": counters,
        }
