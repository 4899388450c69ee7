"""One engine slot of the pool, kept running: start, liveness, restart after a back-off.

When a slot's engine exits, every pending stream of it has already failed with EngineDied
(kgserve.engine.engine); a new process is started after a back-off that doubles from
`engine.restart_backoff_initial_s` up to `engine.restart_backoff_max_s` (reset after a long healthy run). A
crash loop (e.g. a missing model) keeps retrying with that back-off, never busy-looping, and keeps the last
stderr lines for /readyz. A ready engine has a watchdog (kgserve.engine.watchdog): one that answers its
liveness probe late is `frozen` (no new query; its slot's state says so) until it answers, and one that does not
answer within `engine.liveness_timeout_s` (SIGSTOP, a wedged GPU) is killed and restarted.

A deterministic refusal is told apart from a crash: an engine that exits before it is ready REFUSAL_STARTS times
in a row with the same exit status and the same last stderr line (timestamps aside; e.g. KataGo's `Could not
parse ... for key` or a missing GPU) will do so on every start, so the supervisor reports it (`on_refusal`, the
reason) once; kgserve.cli then ends kgserve unless the pool serves on without that engine (enough others ready) or
`engine.stay_up_on_engine_refusal` (the retries go on either way, with the back-off). A crash under load, a start
timeout or a different error on the next start resets the count.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kgserve.engine.engine import Engine
from kgserve.engine.errors import EngineStartupError, exit_how
from kgserve.engine.watchdog import Watchdog
from kgserve.settings import EngineSettings

__all__ = ["EXIT_ENGINE_REFUSED", "HEALTHY_RUN_S", "REFUSAL_STARTS", "Slot", "Supervisor", "refusal_signature"]

log = logging.getLogger("kgserve.engine")
HEALTHY_RUN_S = 60.0  # an engine that ran this long before dying restarts with the initial back-off
REFUSAL_STARTS = 3  # identical failures before ready, in a row, that make a deterministic refusal
EXIT_ENGINE_REFUSED = 3  # kgserve's exit status when it ends on such a refusal (kgserve.cli, kgserve.procs.workers)
# KataGo's (and the sim's) log prefix `2026-11-28 21:19:39+0000: `: not part of what an error says
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\S*:?\s*")


def refusal_signature(error: BaseException) -> tuple[int, str] | None:
    """(exit status, last stderr line without its timestamp) of an engine that exited before it was ready; None
    for any other start failure (a start timeout, an unexpected error): those are not refusals."""
    if not isinstance(error, EngineStartupError) or error.exit_code is None:
        return None
    lines = [_TIMESTAMP.sub("", line).strip() for line in error.stderr_tail]
    lines = [line for line in lines if line]
    return error.exit_code, lines[-1] if lines else ""


@dataclass
class Slot:
    """One of the pool's engine places: its current engine and what its earlier engines left behind."""

    index: int
    state: str = "starting"  # starting | ready | frozen | restarting | failed | stopped
    engine: Engine | None = None
    restarts: int = 0
    start_s: float | None = None
    last_stderr: list[str] = field(default_factory=list)
    last_error: str | None = None
    totals: dict[str, int] = field(default_factory=dict)  # counters of this slot's previous engines
    refusal: tuple[int, str] | None = None  # the signature of the last start failures (refusal_signature)
    refusals: int = 0  # how many starts in a row failed with that signature
    refused: str | None = None  # the reason, once they make a deterministic refusal; cleared when it gets ready
    first_attempt: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def retire(self, engine: Engine, error: str, tail: list[str]) -> None:
        """The engine is done: keep why, its last stderr lines, and its counters in the slot's totals."""
        self.last_error = error
        if tail:
            self.last_stderr = tail
        counters = engine.counters
        for key, value in counters.items():
            self.totals[key] = self.totals.get(key, 0) + value
            counters[key] = 0

    def status(self) -> dict[str, Any]:
        """This slot's entry in /readyz's `engines` (and /metrics' per-engine series)."""
        engine = self.engine
        live = engine is not None and not engine.exited
        # a start in progress shows the last failure's lines until it has finished (or has lines of its own)
        settled = engine is not None and (engine.exited or self.state == "ready")
        own = list(engine.stderr_tail) if engine is not None else []
        tail = own if settled or not self.last_stderr else self.last_stderr
        counters = dict(self.totals)
        if engine is not None:
            for key, value in engine.counters.items():
                counters[key] = counters.get(key, 0) + value
        died = self.state == "ready" and engine is not None and engine.state == "exited"
        return {
            "index": self.index,
            "state": "restarting" if died else self.state,
            "pid": engine.pid if engine is not None and live else None,
            "restarts": self.restarts,
            "start_s": self.start_s,
            "last_stderr": tail,
            "last_error": self.last_error,
            "outstanding_visits": engine.outstanding_visits if engine is not None and live else 0,
            "pending": engine.pending if engine is not None and live else 0,
            "counters": counters,
        }


class Supervisor:
    """Runs one slot until the pool closes (`closing()` turns true, and the pool cancels `run`)."""

    def __init__(
        self,
        slot: Slot,
        settings: EngineSettings,
        *,
        make_engine: Callable[[int], Engine],
        on_ready: Callable[[Engine], None],
        on_change: Callable[[], None],
        closing: Callable[[], bool],
        on_frozen: Callable[[Engine], None] = lambda engine: None,
        on_refusal: Callable[[str], None] = lambda reason: None,
    ) -> None:
        self.slot = slot
        self.settings = settings
        self._make_engine = make_engine
        self._on_ready = on_ready
        self._changed = on_change
        self._closing = closing
        self._on_frozen = on_frozen
        self._on_refusal = on_refusal

    async def run(self, previous: Slot | None) -> None:
        """Engines start one after another: this slot's first start waits for the previous slot's."""
        slot = self.slot
        if previous is not None:
            await previous.first_attempt.wait()
        backoff = self.settings.restart_backoff_initial_s
        while not self._closing():
            engine = self._make_engine(slot.index)
            slot.engine = engine
            self._changed()
            if await self._start(engine):
                began = time.monotonic()
                how = await self._watch_liveness(engine) or f"exited with status {engine.returncode}"
                if self._closing():
                    break
                if time.monotonic() - began >= max(HEALTHY_RUN_S, self.settings.restart_backoff_max_s):
                    backoff = self.settings.restart_backoff_initial_s
                slot.retire(engine, f"{engine.label} {how}", list(engine.stderr_tail))
                slot.state = "restarting"
                log.warning("%s %s; restarting in %.1fs", engine.label, how, backoff)
            else:
                log.warning("%s failed to start: %s; retrying in %.1fs", engine.label, slot.last_error, backoff)
            self._changed()
            await asyncio.sleep(backoff)  # the pool's close cancels this task, which ends any sleep at once
            backoff = min(backoff * 2, self.settings.restart_backoff_max_s)
            slot.restarts += 1
            slot.state = "restarting"
        slot.state = "stopped"
        self._changed()

    async def _start(self, engine: Engine) -> bool:
        """Start the engine; False (the slot marked failed, the reason kept) when it does not get ready."""
        slot = self.slot
        try:
            await engine.start()
        except Exception as exc:  # EngineStartupError, or anything unexpected: retry all the same
            if not isinstance(exc, EngineStartupError):
                log.exception("%s: unexpected start-up failure", engine.label)
                await engine.close(0.0)
            slot.first_attempt.set()
            tail = exc.stderr_tail if isinstance(exc, EngineStartupError) else list(engine.stderr_tail)
            slot.retire(engine, str(exc) or type(exc).__name__, tail)
            slot.state = "failed"
            self._count_refusal(exc)
            return False
        slot.refusal, slot.refusals, slot.refused = None, 0, None
        slot.first_attempt.set()
        slot.state = "ready"
        slot.start_s = engine.start_s
        self._on_ready(engine)
        self._changed()
        return True

    def _count_refusal(self, error: BaseException) -> None:
        slot = self.slot
        signature = refusal_signature(error)
        slot.refusals = slot.refusals + 1 if signature is not None and signature == slot.refusal else 1
        slot.refusal = signature
        if signature is not None and slot.refusals == REFUSAL_STARTS:
            status, line = signature
            slot.refused = (
                f"engine {slot.index} refused to start {REFUSAL_STARTS} times in a row the same way "
                f"({exit_how(status)}: {line or 'no stderr'}), and will on every start"
            )
            self._on_refusal(slot.refused)

    async def _watch_liveness(self, engine: Engine) -> str | None:
        """Wait for the engine to exit while its watchdog probes it (kgserve.engine.watchdog): why it was killed,
        or None when it exited by itself."""

        def frozen(engine: Engine) -> None:
            self.slot.state = "frozen"
            self._on_frozen(engine)
            self._changed()

        def thawed(engine: Engine) -> None:
            if self.slot.state == "frozen":
                self.slot.state = "ready"
            self._changed()

        watchdog = Watchdog(engine, self.settings, closing=self._closing, on_frozen=frozen, on_thawed=thawed)
        how = await watchdog.run()
        if how is not None:
            self.slot.state = "restarting"  # not ready from now on: no new query goes to it
            self._changed()
        return how
