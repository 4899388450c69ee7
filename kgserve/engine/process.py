"""One engine subprocess as the operating system sees it: spawn, stdin, stdout and stderr lines, exit, signals.

Nothing of KataGo's protocol here but its ready line: `EngineProcess` hands every stdout line (without its
newline) to `on_line` (set before `spawn`), keeps the last stderr lines, notes when KataGo's ready line went by,
and calls `on_exit(code)` once the process has exited and its pipes are drained.

- Spawned with 32 MiB stream limits (KataGo's biggest lines are far over asyncio's 64 KiB default), in its own
  session, with the parent-death signal SIGKILL (kgserve.engine.procutil): it cannot outlive kgserve.
- stdin: what is written during one event-loop turn goes out in one write at the end of the turn, so a burst of
  queries is one syscall; the pipe transport buffers what the engine has not read yet.
- stderr: each line goes to `stderr_sink(label, line)` when one is given (kgbench keeps the engines' stderr in a
  job file), else to the log as `stderr_line(label, line)`, the format kgbench reads engine statistics back from.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import signal
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path

from kgserve.engine.errors import EngineStartupError, exit_how
from kgserve.engine.procutil import child_preexec, signal_group
from kgserve.katago.protocol import READY_LINE

__all__ = ["STDERR_LINE", "STREAM_LIMIT", "EngineProcess", "engine_label", "stderr_line"]

log = logging.getLogger("kgserve.engine")
STREAM_LIMIT = 32 * 1024 * 1024
# `stderr_line`'s form, found anywhere in a log line (kgserve's log prefixes its own timestamp and logger)
STDERR_LINE = re.compile(r"(engine\[(\d+)\]) stderr: (.*)")


def engine_label(index: int) -> str:
    """How logs, errors and /readyz name the engine process of slot `index`."""
    return f"engine[{index}]"


def stderr_line(label: str, text: str) -> str:
    """An engine's stderr line as kgserve logs it; STDERR_LINE reads it back."""
    return f"{label} stderr: {text}"


def _drop(line: bytes) -> None:
    log.warning("an engine stdout line before anyone takes them: %s", line[:300].decode("utf-8", "replace"))


class EngineProcess:
    """The subprocess of one engine. Not thread-safe: use it from one event loop."""

    def __init__(
        self,
        argv: list[str],
        *,
        label: str,
        on_exit: Callable[[int], None],
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        stderr_tail_lines: int = 50,
        stderr_sink: Callable[[str, str], None] | None = None,
    ) -> None:
        self.argv = argv
        self.label = label
        self.cwd = cwd
        self.env = env
        self.stderr_sink = stderr_sink
        self.pid: int | None = None
        self.returncode: int | None = None
        self.stderr_tail: deque[str] = deque(maxlen=stderr_tail_lines)
        self.ready = asyncio.Event()  # KataGo's ready line went by on stderr
        self.exited = asyncio.Event()  # set after on_exit has run
        self.on_line: Callable[[bytes], None] = _drop  # who takes the stdout lines (the engine's router)
        self._on_exit = on_exit
        self._proc: asyncio.subprocess.Process | None = None
        self._out = bytearray()  # what is to go to stdin at the end of this event-loop turn
        self._flush_soon: asyncio.Handle | None = None
        self._close_stdin = False
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def spawned(self) -> bool:
        return self._proc is not None

    async def spawn(self) -> None:
        """Start the process and its readers; EngineStartupError when it cannot be run at all."""
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.cwd,
                env=dict(self.env) if self.env is not None else None,
                limit=STREAM_LIMIT,
                start_new_session=True,
                preexec_fn=child_preexec(),
            )
        except OSError as exc:
            self.exited.set()
            raise EngineStartupError(f"{self.label}: cannot run {self.argv[0]}: {exc}") from exc
        self.pid = self._proc.pid
        log.info("%s: started pid %d: %s", self.label, self.pid, " ".join(self.argv))
        stdout = asyncio.create_task(self._read_stdout())
        stderr = asyncio.create_task(self._read_stderr())
        self._tasks = [stdout, stderr, asyncio.create_task(self._watch(stdout, stderr))]

    def exit_message(self, code: int) -> str:
        tail = self.stderr_tail
        return f"{self.label} exited ({exit_how(code)})" + (f"; last stderr: {tail[-1]}" if tail else "")

    # -- stdin ---------------------------------------------------------------------------------------------
    def write(self, line: bytes) -> None:
        self._out += line
        self._schedule_flush()

    def close_stdin(self) -> None:
        """Close stdin once what is queued for it is out."""
        self._close_stdin = True
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if self._flush_soon is None:
            self._flush_soon = asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Write what queued up this turn to stdin (a process that is gone is settled by _watch)."""
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

    # -- signals and exit ----------------------------------------------------------------------------------
    def signal(self, sig: int) -> None:
        """Send `sig` to the engine's process group, if it still runs."""
        if self._proc is not None and self._proc.returncode is None:
            signal_group(self._proc.pid, sig)

    async def kill(self) -> None:
        """SIGKILL, and wait until the exit is handled (on_exit has run)."""
        self.signal(signal.SIGKILL)
        if self._proc is not None:
            await self.exited.wait()

    async def wait_exit(self, seconds: float) -> bool:
        """Whether the process has exited within `seconds`."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.exited.wait(), seconds)
        return self.exited.is_set()

    async def _watch(self, *readers: asyncio.Task[None]) -> None:
        assert self._proc is not None
        code = await self._proc.wait()
        for task in readers:  # lines written before the exit still count
            with contextlib.suppress(Exception):  # TimeoutError: a grandchild still holds the pipe
                await asyncio.wait_for(asyncio.shield(task), 2.0)
        self.returncode = code
        try:
            self._on_exit(code)
        finally:
            for task in self._tasks:
                if task is not asyncio.current_task() and not task.done():
                    task.cancel()
            self.exited.set()

    # -- stdout and stderr ---------------------------------------------------------------------------------
    async def _read_stdout(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        stdout = self._proc.stdout
        on_line = self.on_line
        while True:
            try:
                line = await stdout.readline()
            except ValueError:
                log.error("%s: a stdout line longer than %d bytes was dropped", self.label, STREAM_LIMIT)
                continue
            if not line:
                return
            on_line(line[:-1] if line.endswith(b"\n") else line)

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
            if self.stderr_sink is not None:
                self.stderr_sink(self.label, text)
            else:
                log.info("%s", stderr_line(self.label, text))
            if not self.ready.is_set() and READY_LINE in text:
                self.ready.set()
