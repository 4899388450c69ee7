"""One KataGo analysis-engine subprocess: start, route response lines by id, terminate, close.

No web framework here: kgserve's HTTP layer and kgbench's `transport=direct` both drive it.

- `Engine(spec, index).start()` spawns `spec.argv` (e.g. `katago analysis -config CFG -model MODEL`)
  with 32 MiB stream limits, waits for `Started, ready to begin handling requests` on stderr, then
  asks `query_version` and `query_models` (internal actions; clients never send actions). A child
  that exits or stays silent past `startup_timeout_s` raises `EngineStartupError` with its exit code
  and last stderr lines. Every stderr line goes to `spec.stderr_sink(label, line)` when one is given
  (kgbench keeps the engines' stderr in a job file), else to the log as `engine[i] stderr: <line>`;
  the last `stderr_tail_lines` are kept either way.
- The child cannot outlive kgserve: own process group, parent-death signal SIGKILL (kgserve.engine.procutil).
- `submit(query) -> QueryStream`: the query goes to the engine under a fresh internal id; the stream
  yields the engine's lines for it (without the newline) with the caller's id restored byte for byte.
  It ends after one `isDuringSearch:false` line per analysed turn (`noResults` lines included) or an
  error line for it; it raises `EngineDied` if the process exits first. Two queries with the same
  caller id never see each other's lines.
- `abort(stream)`: KataGo `terminate` for that query; the stream then yields KataGo's final partial
  (or `noResults`) lines and ends. If the engine never answers, `AbortTimeout` ends it after
  `abort_timeout_s`.
- `close(grace_s)`: terminate_all, close stdin, wait `grace_s`, SIGTERM, SIGKILL. Every stream is
  settled (finished or EngineDied) on every exit path.
- `outstanding_visits`: requested visits x turns of the queries not yet finished (for the pool).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import signal
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from kgserve.engine.errors import AbortTimeout, EngineDied, EngineError, EngineStartupError
from kgserve.engine.procutil import child_preexec, signal_group
from kgserve.engine.stream import QueryStream
from kgserve.katago.protocol import Query, engine_line, line_kind, locate_id, restore_id

__all__ = ["READY_TEXT", "Engine", "EngineSpec", "EngineState"]

log = logging.getLogger("kgserve.engine")
READY_TEXT = "Started, ready to begin handling requests"
STREAM_LIMIT = 32 * 1024 * 1024
EngineState = Literal["new", "starting", "ready", "stopping", "exited"]
_ids = itertools.count(1)  # process-wide: an internal id is never reused, not even across restarts


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


class Engine:
    """One engine subprocess. Not thread-safe: use it from one event loop."""

    def __init__(self, spec: EngineSpec, index: int = 0) -> None:
        self.spec = spec
        self.index = index
        self.state: EngineState = "new"
        self.pid: int | None = None
        self.returncode: int | None = None
        self.version: str | None = None
        self.model: str | None = None
        self.git_hash: str | None = None
        self.start_s: float | None = None  # spawn -> ready line, seconds
        self.stderr_tail: deque[str] = deque(maxlen=spec.stderr_tail_lines)
        self.outstanding_visits = 0
        self.counters = {"queries": 0, "finished": 0, "died": 0, "aborted": 0, "lines": 0, "unrouted": 0}
        self._proc: asyncio.subprocess.Process | None = None
        self._streams: dict[bytes, QueryStream] = {}
        self._actions: dict[bytes, asyncio.Future[bytes] | None] = {}
        # what is to go to stdin: written once per event-loop turn, so a burst of queries is one write
        self._out = bytearray()
        self._flush_soon: asyncio.Handle | None = None
        self._close_stdin = False
        self._ready = asyncio.Event()
        self._exited = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._stdout_done: asyncio.Task[None] | None = None
        self._stderr_done: asyncio.Task[None] | None = None

    # -- lifecycle -----------------------------------------------------------------------------------
    @property
    def label(self) -> str:
        return self.spec.label

    @property
    def pending(self) -> int:
        return len(self._streams)

    async def start(self) -> None:
        """Spawn the engine and wait until it is ready; EngineStartupError if it is not."""
        if self.state != "new":
            raise EngineError(f"{self.label} was already started")
        self.state = "starting"
        began = time.monotonic()
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.spec.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.spec.cwd,
                env=dict(self.spec.env) if self.spec.env is not None else None,
                limit=STREAM_LIMIT,
                start_new_session=True,
                preexec_fn=child_preexec(),
            )
        except OSError as exc:
            self.state = "exited"
            self._exited.set()
            raise EngineStartupError(f"{self.label}: cannot run {self.spec.argv[0]}: {exc}") from exc
        self.pid = self._proc.pid
        log.info("%s: started pid %d: %s", self.label, self.pid, " ".join(self.spec.argv))
        self._stdout_done = asyncio.create_task(self._read_stdout())
        self._stderr_done = asyncio.create_task(self._read_stderr())
        self._tasks = [self._stdout_done, self._stderr_done]
        self._tasks.append(asyncio.create_task(self._watch()))
        try:
            await self._await_ready()
            self.start_s = time.monotonic() - began
            self.version, self.model = await self._identify()
        except BaseException:
            await self._kill()
            raise
        self.state = "ready"
        log.info("%s: ready in %.2fs (version %s, model %s)", self.label, self.start_s, self.version, self.model)

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

    async def _await_ready(self) -> None:
        ready = asyncio.create_task(self._ready.wait())
        exited = asyncio.create_task(self._exited.wait())
        try:
            await asyncio.wait({ready, exited}, timeout=self.spec.startup_timeout_s, return_when="FIRST_COMPLETED")
        finally:
            ready.cancel()
            exited.cancel()
        if self._ready.is_set() and not self._exited.is_set():
            return
        if self._exited.is_set():
            message = f"{self.label} exited with status {self.returncode} before it was ready"
        else:
            message = f"{self.label} was not ready after {self.spec.startup_timeout_s:g}s"
            await self._kill()
        tail = list(self.stderr_tail)
        if tail:
            message += f"; last stderr: {tail[-1]}"
        raise EngineStartupError(message, exit_code=self.returncode, stderr_tail=tail)

    async def wait(self) -> int | None:
        """Wait until the process has exited and every stream is settled; its exit status."""
        await self._exited.wait()
        return self.returncode

    @property
    def exited(self) -> bool:
        return self._exited.is_set()

    async def close(self, grace_s: float = 5.0) -> int | None:
        """terminate_all, close stdin, wait up to grace_s, SIGTERM (5 s), SIGKILL. Returns the exit status."""
        if self._proc is None or self._exited.is_set():
            self.state = "exited" if self._proc is not None else self.state
            return self.returncode
        if self.state != "exited":
            self.state = "stopping"
        if self._streams:
            self._send_action("terminate_all", wait=False)
        self._close_stdin = True  # once queued writes are out
        self._schedule_flush()
        if not await self._wait_exit(grace_s):
            log.warning("%s: still running %.1fs after stdin closed: SIGTERM", self.label, grace_s)
            self._signal(signal.SIGTERM)
            if not await self._wait_exit(5.0):
                log.warning("%s: still running after SIGTERM: SIGKILL", self.label)
                await self._kill()
        return self.returncode

    async def probe(self, timeout_s: float) -> bool:
        """Liveness: does the engine answer an internal query_version within timeout_s?

        A frozen engine (SIGSTOP, a wedged GPU) still has its process, so only an answer tells."""
        if self.state != "ready" or self._exited.is_set():
            return False
        future = self._send_action("query_version", wait=True)
        assert future is not None
        try:
            await asyncio.wait_for(future, timeout_s)
        except (TimeoutError, EngineDied):
            return False
        return True

    async def kill(self) -> None:
        """SIGKILL the engine's process group and wait until every stream is settled (EngineDied)."""
        await self._kill()

    async def _wait_exit(self, seconds: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._exited.wait(), seconds)
        return self._exited.is_set()

    async def _kill(self) -> None:
        self._signal(signal.SIGKILL)
        if self._proc is not None:
            await self._exited.wait()

    def _signal(self, sig: int) -> None:
        if self._proc is not None and self._proc.returncode is None:
            signal_group(self._proc.pid, sig)

    # -- queries -------------------------------------------------------------------------------------
    def submit(self, query: Query) -> QueryStream:
        """Send one analysis query; its lines arrive on the returned stream."""
        if self.state != "ready":
            if self._exited.is_set():
                raise EngineDied(
                    f"{self.label} is not running (exit status {self.returncode})",
                    exit_code=self.returncode,
                    stderr_tail=list(self.stderr_tail),
                )
            raise EngineError(f"{self.label} is not ready ({self.state})")
        internal = f"kgq{next(_ids)}"
        visits = query.visits if query.visits is not None and query.visits > 0 else self.spec.default_visits
        stream = QueryStream(self, query, internal, visits)
        self._streams[internal.encode()] = stream
        self.outstanding_visits += stream.outstanding_visits
        self.counters["queries"] += 1
        self._send_line(engine_line(query, internal))
        return stream

    def abort(self, stream: QueryStream, turns: list[int] | None = None) -> None:
        """Ask KataGo to terminate the query (only `turns` of it, when given); its last lines still arrive."""
        if turns is not None:
            # some turns only: the stream still ends after its finals (KataGo's noResults/partial lines)
            if not stream.done and stream.engine is self and not self._exited.is_set():
                self._send_action("terminate", wait=False, terminateId=stream.internal_id, turnNumbers=turns)
            return
        if stream.done or stream.aborted or stream.engine is not self:
            return
        stream.aborted = True
        self.counters["aborted"] += 1
        if self._proc is None or self._exited.is_set():
            return
        self._send_action("terminate", wait=False, terminateId=stream.internal_id)
        stream._abort_timer = asyncio.get_running_loop().call_later(
            self.spec.abort_timeout_s, self._abort_expired, stream
        )

    def _abort_expired(self, stream: QueryStream) -> None:
        stream._abort_timer = None
        self._settle(
            stream, AbortTimeout(f"{self.label} did not answer terminate within {self.spec.abort_timeout_s:g}s")
        )

    def _settle(self, stream: QueryStream, error: BaseException | None) -> None:
        if stream.done:
            return
        self._streams.pop(stream.internal_id.encode(), None)
        self.outstanding_visits -= stream.outstanding_visits
        stream._settle(error)
        self.counters["died" if isinstance(error, EngineDied) else "finished"] += 1

    # -- actions (internal only) ---------------------------------------------------------------------
    def _send_action(self, action: str, *, wait: bool, **fields: Any) -> asyncio.Future[bytes] | None:
        internal = f"kga{next(_ids)}"
        future: asyncio.Future[bytes] | None = asyncio.get_running_loop().create_future() if wait else None
        self._actions[internal.encode()] = future
        payload = {"id": internal, "action": action, **fields}
        self._send_line((json.dumps(payload, separators=(",", ":")) + "\n").encode())
        return future

    async def _action(self, action: str) -> bytes:
        future = self._send_action(action, wait=True)
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

    # -- I/O tasks -----------------------------------------------------------------------------------
    async def _read_stdout(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        stdout = self._proc.stdout
        while True:
            try:
                line = await stdout.readline()
            except ValueError:
                log.error("%s: a stdout line longer than %d bytes was dropped", self.label, STREAM_LIMIT)
                continue
            if not line:
                return
            self._route(line[:-1] if line.endswith(b"\n") else line)

    def _route(self, line: bytes) -> None:
        self.counters["lines"] += 1
        span = locate_id(line)
        key = line[span[0] : span[1]] if span is not None else b""
        stream = self._streams.get(key) if span is not None else None
        if stream is not None and span is not None:
            kind = line_kind(line, span[1])
            stream._push(restore_id(line, span, stream.caller_id_json))
            if kind == "final":
                stream.finals_left -= 1
                self.outstanding_visits -= stream.visits_per_turn
                if stream.finals_left <= 0:
                    self._settle(stream, None)
            elif kind == "error":
                self._settle(stream, None)
            return
        if key in self._actions:
            future = self._actions.pop(key)
            if future is not None and not future.done():
                future.set_result(line)
            return
        self.counters["unrouted"] += 1
        log.warning("%s: stdout line for no pending query: %s", self.label, line[:300].decode("utf-8", "replace"))

    async def _read_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        stderr = self._proc.stderr
        while True:
            try:
                raw = await stderr.readline()
            except ValueError:
                continue
            if not raw:
                return
            text = raw.decode("utf-8", "replace").rstrip("\r\n")
            self.stderr_tail.append(text)
            if self.spec.stderr_sink is not None:
                self.spec.stderr_sink(self.label, text)
            else:
                log.info("%s stderr: %s", self.label, text)
            if not self._ready.is_set() and READY_TEXT in text:
                self._ready.set()

    def _send_line(self, line: bytes) -> None:
        self._out += line
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if self._flush_soon is None:
            self._flush_soon = asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Write what queued up this turn to stdin. The pipe transport buffers what the engine has not read
        yet (as the queue in front of it used to); a process that is gone is settled by _watch."""
        self._flush_soon = None
        if self._proc is None or self._proc.stdin is None:
            return
        stdin = self._proc.stdin
        try:
            if self._out:
                stdin.write(bytes(self._out))
                self._out.clear()
            if self._close_stdin:
                stdin.close()
        except (OSError, RuntimeError) as exc:
            log.warning("%s: cannot write to the engine: %s", self.label, exc)

    async def _watch(self) -> None:
        assert self._proc is not None
        code = await self._proc.wait()
        for task in (self._stdout_done, self._stderr_done):  # lines written before the exit still count
            if task is not None:
                with contextlib.suppress(Exception):  # TimeoutError: a grandchild still holds the pipe
                    await asyncio.wait_for(asyncio.shield(task), 2.0)
        self.returncode = code
        self.state = "exited"
        tail = list(self.stderr_tail)
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        message = f"{self.label} exited ({how})" + (f"; last stderr: {tail[-1]}" if tail else "")
        level = logging.INFO if code == 0 and not self._streams else logging.WARNING
        log.log(level, "%s", message)
        for stream in list(self._streams.values()):
            self._settle(stream, EngineDied(message, exit_code=code, stderr_tail=tail))
        for future in self._actions.values():
            if future is not None and not future.done():
                future.set_exception(EngineDied(message, exit_code=code, stderr_tail=tail))
        self._actions.clear()
        for task in self._tasks:
            if task is not asyncio.current_task() and not task.done():
                task.cancel()
        self._exited.set()
