"""N supervised engine processes behind one kgserve (settings.engine.processes): the `EngineClient` kgserve serves.

- `EnginePool(settings, backend=None)`; `await pool.start()` returns at once: engines start one after
  another in the background (kgserve serves /healthz and /readyz meanwhile). `await pool.wait_ready()`
  waits for `engine.required_ready` of them (kgbench's transport=direct uses this).
- Each engine slot is kept running by its supervisor (kgserve.engine.supervisor: restart back-off, liveness).
- `submit(query, client)` hands the query to the pool's dispatch (kgserve.engine.dispatch) and returns its
  QueryStream; `NoEngineReady` (with the reason) when no engine is ready. The dispatch writes it to the ready
  engine with the least outstanding visits (requested visits x turns of unfinished queries), preferring engines
  not suspected of being frozen; with the thread reserve (`engine.thread_reserve`, `client`: the per-client caps'
  key) it may hold its turns back in kgserve, one queue for every engine: a held turn goes to whichever engine
  frees a thread first. A frozen engine (kgserve.engine.watchdog) takes no query, and its queries' pieces that
  have had no line yet move to the other engines at once. `abort(stream)` terminates that query.
- `status()`: the /readyz data: ready, degraded (some engine not serving), reason, required_ready,
  katago_version, model, simulated and engines[] (kgserve.engine.supervisor.Slot.status).
- `await pool.close(grace_s)`: every engine closes (terminate_all, stdin closed, wait, SIGTERM, SIGKILL).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from kgserve.engine.client import is_simulated
from kgserve.engine.dispatch import Dispatch
from kgserve.engine.engine import Engine, EngineSpec
from kgserve.engine.errors import NoEngineReady
from kgserve.engine.process import engine_label
from kgserve.engine.reserve import thread_reserve
from kgserve.engine.router import Router
from kgserve.engine.stream import QueryStream
from kgserve.engine.supervisor import Slot, Supervisor
from kgserve.katago.cfg import cfg_analysis_threads, cfg_max_visits
from kgserve.katago.protocol import Query
from kgserve.settings import Settings

__all__ = ["FALLBACK_VISITS", "EnginePool", "engine_argv"]

log = logging.getLogger("kgserve.engine")
FALLBACK_VISITS = 500  # what a query without maxVisits costs when the cfg sets no maxVisits either


def engine_argv(settings: Settings, backend: str | None = None) -> list[str]:
    engine = settings.engine
    model = engine.model_for(backend)
    return [*engine.argv_prefix(backend), "analysis", "-config", str(engine.cfg), "-model", str(model)]


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
        # per engine: its cfg's numAnalysisThreads (unreadable: no reserve, every query written at once)
        self.thread_reserve = thread_reserve(
            cfg_analysis_threads(settings.engine.cfg), settings.engine.thread_reserve, settings.engine.lend_bound_s
        )
        self.required_ready = settings.engine.required_ready
        self.katago_version: str | None = None
        self.model: str | None = None
        self.katago_git_hash: str | None = None
        self._slots = [Slot(index) for index in range(settings.engine.processes)]
        # one queue for every engine: a held turn goes to the first engine that frees a thread
        self.dispatch = Dispatch(
            self.thread_reserve, self._ready_routers, abort_timeout_s=self.engine_spec(0).abort_timeout_s
        )
        self._closing = False
        self._wake = asyncio.Event()
        self._started = False
        # set when an engine refuses every start (kgserve.engine.supervisor) while the pool is not ready: whoever
        # ends kgserve on it waits for this (kgserve.cli, unless engine.stay_up_on_engine_refusal)
        self.refused = asyncio.Event()

    # -- lifecycle -----------------------------------------------------------------------------------------
    def engine_spec(self, index: int) -> EngineSpec:
        engine = self.settings.engine
        values: dict[str, Any] = {
            "argv": list(self.argv),
            "env": self.env,
            "startup_timeout_s": engine.backend_settings(self.backend).startup_timeout_s,
            "label": engine_label(index),
            "stderr_tail_lines": engine.stderr_tail_lines,
            "default_visits": self.default_visits,
            "stderr_sink": self.stderr_sink,
            "thread_reserve": self.thread_reserve,
        }
        values.update(self.spec_overrides)
        return EngineSpec(**values)

    def _make_engine(self, index: int) -> Engine:
        return Engine(self.engine_spec(index), index, self.dispatch)

    def _engine_ready(self, engine: Engine) -> None:
        self.katago_version = engine.version
        self.model = engine.model
        self.katago_git_hash = engine.git_hash

    async def start(self) -> None:
        """Start supervising (engines start one after another, in the background)."""
        if self._started:
            return
        self._started = True
        previous: Slot | None = None
        for slot in self._slots:
            supervisor = Supervisor(
                slot,
                self.settings.engine,
                make_engine=self._make_engine,
                on_ready=self._engine_ready,
                on_change=self._changed,
                closing=lambda: self._closing,
                on_frozen=self._move_unstarted,
                on_refusal=self._refused,
            )
            slot.task = asyncio.create_task(supervisor.run(previous), name=f"kgserve-engine-{slot.index}")
            previous = slot

    @property
    def refusal(self) -> str | None:
        """Why an engine refuses every start (the first such engine's reason), or None."""
        return next((slot.refused for slot in self._slots if slot.refused is not None), None)

    def _refused(self, reason: str) -> None:
        if self.ready:  # the others serve: degraded, /readyz names the refusal, nothing to end
            log.error("%s; the pool serves on without it", reason)
            return
        log.error("%s", reason)
        self.refused.set()

    def _changed(self) -> None:
        """An engine's state changed (ready, frozen, thawed, gone): waiters wake, a ready one takes held turns."""
        self._wake.set()
        if not self._closing:
            self.dispatch.fill_all()

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

    async def close(self, grace_s: float = 5.0) -> None:
        """Close every engine (terminate_all, stdin closed, wait grace_s, SIGTERM, SIGKILL)."""
        self._closing = True
        self._wake.set()
        self.dispatch.close()  # held turns answered as KataGo answers terminate_all for queued ones
        engines = [slot.engine for slot in self._slots if slot.engine is not None and slot.state == "ready"]
        frozen = [slot.engine for slot in self._slots if slot.engine is not None and slot.state == "frozen"]
        closing = [*(engine.close(grace_s) for engine in engines), *(engine.kill() for engine in frozen)]
        await asyncio.gather(*closing, return_exceptions=True)
        tasks = [slot.task for slot in self._slots if slot.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for slot in self._slots:
            if slot.engine is not None and not slot.engine.exited:
                await slot.engine.close(0.0)
            slot.state = "stopped"

    # -- queries -------------------------------------------------------------------------------------------
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

    def _ready_routers(self) -> list[Router]:
        return [engine.router for engine in self.ready_engines]

    def submit(self, query: Query, client: str | None = None) -> QueryStream:
        """Send the query (to the ready engine with the least outstanding visits, or held for a thread: the
        dispatch); `client`: whose it is, for the thread reserve (None: never held back)."""
        if self._closing:
            raise NoEngineReady("kgserve is shutting down")
        if not self.ready_count:
            raise NoEngineReady(self._reason())
        visits = query.visits if query.visits is not None and query.visits > 0 else self.default_visits
        return self.dispatch.submit(query, client, visits)

    def _move_unstarted(self, frozen: Engine) -> None:
        """A frozen engine's pieces that have had no line yet go to the other engines (none ready: they stay)."""
        if self._closing:
            return
        moved = self.dispatch.take_back(frozen.router)
        if moved:
            log.warning("%s is frozen: %d of its queries moved to other engines", frozen.label, moved)

    def abort(self, stream: QueryStream, turns: frozenset[int] | None = None) -> None:
        self.dispatch.abort(stream, turns)

    # -- status --------------------------------------------------------------------------------------------
    def _reason(self) -> str:
        if self._closing:
            return "the engine pool is closed"
        reason = f"{self.ready_count} of {len(self._slots)} engine(s) ready, {self.required_ready} required"
        frozen = [slot.engine.label for slot in self._slots if slot.state == "frozen" and slot.engine is not None]
        if frozen:
            reason += f"; {', '.join(frozen)} answered query_version late (frozen?) and take no query"
        errors = [slot.last_error for slot in self._slots if slot.state != "ready" and slot.last_error]
        if errors:
            reason += f"; {errors[-1]}"
        elif not self._started:
            reason += "; the pool was not started"
        if self.refusal is not None:
            reason += f"; {self.refusal}"
        return reason

    def status(self) -> dict[str, Any]:
        ready = self.ready
        serving = self.ready_count
        return {
            "ready": ready,
            # some engine is not serving (frozen, restarting, starting): fewer engines take queries than configured
            "degraded": self._started and not self._closing and serving < len(self._slots),
            "reason": None if ready and serving == len(self._slots) else self._reason(),
            "required_ready": self.required_ready,
            "backend": self.backend,
            "katago_version": self.katago_version,
            "model": self.model,
            "simulated": is_simulated(self.backend, self.katago_version),
            "engines": [slot.status() for slot in self._slots],
            # turns waiting in kgserve for an analysis thread (kgserve.engine.dispatch): one queue for all engines
            "held": self.dispatch.status(),
        }
