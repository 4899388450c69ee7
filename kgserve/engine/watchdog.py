"""One engine's watchdog: liveness probes, frozen-engine detection, and the kill of an engine that stays frozen.

A frozen engine (SIGSTOP, a wedged GPU or driver) keeps its process and its pipes: only an answer tells it from a
busy one. So the watchdog asks it `query_version` (KataGo answers actions from its reading thread at once, even
while every search thread is busy):

- every `engine.liveness_interval_s`, and at once when the engine has queries pending and has written nothing
  for `engine.silent_probe_s` (it is `suspect` meanwhile: the pool sends new queries to another engine if one
  is healthy);
- a probe not answered within `engine.probe_late_s`: the engine is frozen: it takes no new query, its queries
  that have had no line yet go to a healthy engine (`on_frozen`), /readyz says the pool is degraded; answered
  later, it is thawed (`on_thawed`) and takes queries again;
- not answered within `engine.liveness_timeout_s`: it is killed (its queries end with EngineDied) and the
  supervisor restarts it.

Nothing here is on a query's path: the watchdog reads the engine's line counter on its own timer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from kgserve.engine.engine import Engine
from kgserve.engine.errors import EngineDied
from kgserve.settings import EngineSettings

__all__ = ["Watchdog"]

log = logging.getLogger("kgserve.engine")
MAX_TICK_S = 0.25  # how often the watchdog looks at the engine's line counter


class Watchdog:
    def __init__(
        self,
        engine: Engine,
        settings: EngineSettings,
        *,
        closing: Callable[[], bool],
        on_frozen: Callable[[Engine], None],
        on_thawed: Callable[[Engine], None],
    ) -> None:
        self.engine = engine
        self.settings = settings
        self._closing = closing
        self._on_frozen = on_frozen
        self._on_thawed = on_thawed
        self._tick = min(MAX_TICK_S, settings.liveness_interval_s, settings.silent_probe_s)

    async def run(self) -> str | None:
        """Watch until the engine exits: why it was killed, or None when it exited by itself."""
        engine = self.engine
        last_probe = time.monotonic()
        last_lines, quiet_since = engine.lines_seen, last_probe
        while not engine.exited:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(engine.wait(), self._tick)
            if engine.exited or self._closing():
                break
            now = time.monotonic()
            if engine.lines_seen != last_lines or not engine.pending:
                last_lines, quiet_since = engine.lines_seen, now
            silent = now - quiet_since >= self.settings.silent_probe_s
            if not silent and now - last_probe < self.settings.liveness_interval_s:
                continue
            engine.suspect = silent
            verdict = await self._probe()
            if verdict is not None:
                return verdict
            last_probe = time.monotonic()
            last_lines, quiet_since = engine.lines_seen, last_probe
        await engine.wait()
        return None

    async def _probe(self) -> str | None:
        """One query_version: late -> frozen, then thawed or killed. Why it was killed, or None."""
        engine = self.engine
        answer = engine.start_probe()
        if answer is None:
            return None
        late_s = min(self.settings.probe_late_s, self.settings.liveness_timeout_s)
        if await self._answered(answer, late_s):
            engine.suspect = False
            return None
        if engine.exited or self._closing():
            return None
        log.warning(
            "%s did not answer query_version within %gs (frozen?): it takes no new query (engine.probe_late_s)",
            engine.label,
            late_s,
        )
        self._on_frozen(engine)
        if await self._answered(answer, self.settings.liveness_timeout_s - late_s, last=True):
            log.warning("%s answered query_version again: it takes queries again", engine.label)
            engine.suspect = False
            self._on_thawed(engine)
            return None
        if engine.exited or self._closing():
            return None
        timeout = self.settings.liveness_timeout_s
        log.warning(
            "%s did not answer query_version within %gs (frozen?): killing it (engine.liveness_timeout_s)",
            engine.label,
            timeout,
        )
        await engine.kill()
        return f"did not answer query_version within {timeout:g}s and was killed"

    @staticmethod
    async def _answered(answer: asyncio.Future[bytes], seconds: float, *, last: bool = False) -> bool:
        """Whether the probe is answered within `seconds` (an engine that died meanwhile did not answer); the
        `last` wait gives the answer up (cancelled) when it times out."""
        try:
            await asyncio.wait_for(answer if last else asyncio.shield(answer), max(0.0, seconds))
        except (TimeoutError, EngineDied):
            return False
        return True
