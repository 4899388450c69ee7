"""One KataGo analysis engine: its subprocess (kgserve.engine.process) and its router (kgserve.engine.router).

- `Engine(spec, index).start()` spawns `spec.argv` (e.g. `katago analysis -config CFG -model MODEL`), waits for
  KataGo's ready line on stderr, then asks `query_version` and `query_models` (internal actions; clients never
  send actions). A child that exits or stays silent past `startup_timeout_s` raises `EngineStartupError` with
  its exit code and last stderr lines.
- `submit(query, client) -> QueryStream`: the stream yields the engine's lines for the query (without the newline)
  with the caller's id restored byte for byte; it ends after the query's last line, or raises `EngineDied` if the
  process exits first. The query may wait in kgserve for a thread first (`spec.thread_reserve`,
  kgserve.engine.dispatch); to its client that is a query queued inside KataGo. An engine of a pool shares the
  pool's dispatch (`dispatch=`): its queries are the pool's to place.
- `abort(stream)`: KataGo `terminate` for that query; the stream then yields KataGo's final partial (or
  `noResults`) lines and ends. If the engine never answers, `AbortTimeout` ends it after `abort_timeout_s`.
- `close(grace_s)`: terminate_all, close stdin, wait `grace_s`, SIGTERM, SIGKILL. Every stream is settled
  (finished or EngineDied) on every exit path.
- `start_probe()`: liveness, an internal query_version answered in time (the watchdog,
  kgserve.engine.watchdog, sets `suspect`, and its slot's state `frozen`; the pool's dispatch then moves its
  pieces that have had no line yet to another engine).
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kgserve.engine.dispatch import Dispatch
from kgserve.engine.errors import EngineDied, EngineError, EngineStartupError
from kgserve.engine.process import EngineProcess
from kgserve.engine.reserve import ThreadReserve
from kgserve.engine.router import Router
from kgserve.engine.stream import QueryStream
from kgserve.katago.protocol import Query

__all__ = ["Engine", "EngineSpec", "EngineState"]

log = logging.getLogger("kgserve.engine")
EngineState = Literal["new", "starting", "ready", "stopping", "exited"]


@dataclass(frozen=True)
class EngineSpec:
    argv: list[str]
    cwd: Path | None = None
    env: Mapping[str, str] | None = None  # None: inherit kgserve's environment
    startup_timeout_s: float = 300.0
    label: str = "engine[0]"
    stderr_tail_lines: int = 50
    default_visits: int = 500  # cost of a query without an integer maxVisits (the cfg's maxVisits)
    abort_timeout_s: float = 15.0
    action_timeout_s: float = 30.0
    stderr_sink: Callable[[str, str], None] | None = None  # (label, line) for each stderr line, instead of the log
    thread_reserve: ThreadReserve | None = None  # kgserve.engine.dispatch; None: every query written at once


class Engine:
    """One engine subprocess. Not thread-safe: use it from one event loop."""

    def __init__(self, spec: EngineSpec, index: int = 0, dispatch: Dispatch | None = None) -> None:
        self.spec = spec
        self.index = index
        self.state: EngineState = "new"
        self.version: str | None = None
        self.model: str | None = None
        self.git_hash: str | None = None
        self.start_s: float | None = None  # spawn -> ready line, seconds
        # set by its watchdog (kgserve.engine.watchdog): silent with queries pending (a probe is out): the pool sends
        # new queries elsewhere; a frozen one (a probe answered late) is its slot's state "frozen" and gets none at all
        self.suspect = False
        self.process = EngineProcess(
            list(spec.argv),
            label=spec.label,
            on_exit=self._on_exit,
            cwd=spec.cwd,
            env=spec.env,
            stderr_tail_lines=spec.stderr_tail_lines,
            stderr_sink=spec.stderr_sink,
        )
        # a lone engine places its own queries; a pool's engines share the pool's dispatch
        self._own_dispatch = dispatch is None
        self.dispatch = dispatch or Dispatch(
            spec.thread_reserve,
            lambda: [self.router] if self.state == "ready" and not self.exited else [],
            abort_timeout_s=spec.abort_timeout_s,
        )
        plan = self.dispatch.plan
        self.router = Router(
            self,
            self.process.write,
            label=spec.label,
            dispatch=self.dispatch,
            threads=plan.threads if plan is not None else None,
            index=index,
        )
        self.process.on_line = self.router.route  # stdout lines straight to the router

    # -- what the pool and /readyz read --------------------------------------------------------------------
    @property
    def label(self) -> str:
        return self.spec.label

    @property
    def pid(self) -> int | None:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    @property
    def stderr_tail(self) -> deque[str]:
        return self.process.stderr_tail

    @property
    def pending(self) -> int:
        return self.router.pending

    @property
    def outstanding_visits(self) -> int:
        return self.router.outstanding_visits

    @property
    def counters(self) -> dict[str, int]:
        return self.router.counters

    @property
    def lines_seen(self) -> int:
        """Stdout lines the engine has written so far (the watchdog's sign of life)."""
        return self.router.counters["lines"]

    @property
    def exited(self) -> bool:
        return self.process.exited.is_set()

    # -- lifecycle -----------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Spawn the engine and wait until it is ready; EngineStartupError if it is not."""
        if self.state != "new":
            raise EngineError(f"{self.label} was already started")
        self.state = "starting"
        began = time.monotonic()
        try:
            await self.process.spawn()
        except EngineStartupError:
            self.state = "exited"
            raise
        try:
            await self._await_ready()
            self.start_s = time.monotonic() - began
            self.version, self.model = await self._identify()
        except BaseException:
            await self.process.kill()
            raise
        self.state = "ready"
        log.info("%s: ready in %.2fs (version %s, model %s)", self.label, self.start_s, self.version, self.model)

    async def _await_ready(self) -> None:
        ready = asyncio.create_task(self.process.ready.wait())
        exited = asyncio.create_task(self.process.exited.wait())
        try:
            await asyncio.wait({ready, exited}, timeout=self.spec.startup_timeout_s, return_when="FIRST_COMPLETED")
        finally:
            ready.cancel()
            exited.cancel()
        if self.process.ready.is_set() and not self.exited:
            return
        if self.exited:
            message = f"{self.label} exited with status {self.returncode} before it was ready"
        else:
            message = f"{self.label} was not ready after {self.spec.startup_timeout_s:g}s"
            await self.process.kill()
        tail = list(self.stderr_tail)
        if tail:
            message += f"; last stderr: {tail[-1]}"
        raise EngineStartupError(message, exit_code=self.returncode, stderr_tail=tail)

    async def _identify(self) -> tuple[str | None, str | None]:
        version_line = await self._action("query_version")
        models_line = await self._action("query_models")
        try:
            version = json.loads(version_line).get("version")
            self.git_hash = json.loads(version_line).get("git_hash")
            models = json.loads(models_line).get("models") or [{}]
            model = models[0].get("name")
        except (ValueError, AttributeError, TypeError, IndexError) as exc:
            raise EngineStartupError(f"{self.label} answered query_version/query_models oddly: {exc}") from exc
        return (str(version) if version is not None else None), (str(model) if model is not None else None)

    async def _action(self, action: str) -> bytes:
        future = self.router.send_action(action, wait=True)
        assert future is not None
        try:
            return await asyncio.wait_for(future, self.spec.action_timeout_s)
        except TimeoutError:
            raise EngineStartupError(
                f"{self.label} did not answer {action} within {self.spec.action_timeout_s:g}s",
                stderr_tail=list(self.stderr_tail),
            ) from None
        except EngineDied as exc:
            raise EngineStartupError(
                f"{self.label} exited (status {exc.exit_code}) while answering {action}",
                exit_code=exc.exit_code,
                stderr_tail=exc.stderr_tail,
            ) from None

    def _on_exit(self, code: int) -> None:
        """The process has exited (its pipes drained): every stream and awaited action fails with EngineDied."""
        self.state = "exited"
        message = self.process.exit_message(code)
        log.log(logging.INFO if code == 0 and not self.router.pending else logging.WARNING, "%s", message)
        self.router.fail_all(EngineDied(message, exit_code=code, stderr_tail=list(self.stderr_tail)))

    async def wait(self) -> int | None:
        """Wait until the process has exited and every stream is settled; its exit status."""
        await self.process.exited.wait()
        return self.returncode

    async def close(self, grace_s: float = 5.0) -> int | None:
        """terminate_all, close stdin, wait up to grace_s, SIGTERM (5 s), SIGKILL. Returns the exit status."""
        if not self.process.spawned or self.exited:
            self.state = "exited" if self.process.spawned else self.state
            return self.returncode
        if self.state != "exited":
            self.state = "stopping"
        if self._own_dispatch:
            self.dispatch.close()  # held turns answered as KataGo answers terminate_all for queued ones
        if self.router.pending:
            self.router.send_action("terminate_all", wait=False)
        self.process.close_stdin()  # once queued writes are out
        if not await self.process.wait_exit(grace_s):
            log.warning("%s: still running %.1fs after stdin closed: SIGTERM", self.label, grace_s)
            self.process.signal(signal.SIGTERM)
            if not await self.process.wait_exit(5.0):
                log.warning("%s: still running after SIGTERM: SIGKILL", self.label)
                await self.process.kill()
        return self.returncode

    def start_probe(self) -> asyncio.Future[bytes] | None:
        """Liveness: an internal query_version, its answer as a future (None: the engine is not running).

        A frozen engine (SIGSTOP, a wedged GPU) still has its process, so only an answer tells."""
        if self.state != "ready" or self.exited:
            return None
        return self.router.send_action("query_version", wait=True)

    async def kill(self) -> None:
        """SIGKILL the engine's process group and wait until every stream is settled (EngineDied)."""
        await self.process.kill()

    # -- queries -------------------------------------------------------------------------------------------
    def submit(self, query: Query, client: str | None = None) -> QueryStream:
        """Send one analysis query (`client`: the per-client caps' key, for the thread reserve); its lines arrive
        on the returned stream."""
        if self.state != "ready":
            if self.exited:
                raise EngineDied(
                    f"{self.label} is not running (exit status {self.returncode})",
                    exit_code=self.returncode,
                    stderr_tail=list(self.stderr_tail),
                )
            raise EngineError(f"{self.label} is not ready ({self.state})")
        visits = query.visits if query.visits is not None and query.visits > 0 else self.spec.default_visits
        return self.dispatch.submit(query, client, visits)

    def abort(self, stream: QueryStream, turns: frozenset[int] | None = None) -> None:
        """Ask KataGo to terminate the query (only `turns` of it, when given): its last lines still arrive (a turn
        is sent a terminate once, however often a client asks; turns still held in kgserve are answered at once)."""
        self.dispatch.abort(stream, turns)
