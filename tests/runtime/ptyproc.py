"""A small pexpect-like driver on the standard library: a child process on a pseudo-terminal."""

from __future__ import annotations

import contextlib
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

# The child starts with SIGINT and SIGQUIT at their defaults, then execs argv (same pid). A test run started in the
# background of a non-interactive shell (`... &`, as a CI runner may) inherits them ignored, and bash cannot trap a
# signal that was ignored when it started: the script under test would never see the user's Ctrl-C.
_DEFAULT_SIGNALS = (
    "import os, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
    "signal.signal(signal.SIGQUIT, signal.SIG_DFL)\n"
    "os.execvp(sys.argv[1], sys.argv[1:])"
)


class PtyProcess:
    def __init__(self, argv: list[str], *, env: Mapping[str, str], cwd: Path) -> None:
        self.master, slave = os.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _DEFAULT_SIGNALS, *argv],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
        os.close(slave)
        self.buffer = ""
        self.seen = ""  # everything read so far (for failure messages)

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        if not data:
            return False
        text = data.decode("utf-8", errors="replace").replace("\r\n", "\n")
        self.buffer += text
        self.seen += text
        return True

    def expect(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        """Wait for a regex in the output; consume the output up to the end of the match."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while True:
            match = regex.search(self.buffer)
            if match:
                self.buffer = self.buffer[match.end() :]
                return match
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out after {timeout}s waiting for {pattern!r}; output:\n{self.seen}")
            if not self._read(min(remaining, 0.5)) and self.proc.poll() is not None:
                if regex.search(self.buffer):
                    continue
                raise AssertionError(
                    f"process exited ({self.proc.returncode}) before {pattern!r}; output:\n{self.seen}"
                )

    def send_line(self, text: str) -> None:
        os.write(self.master, (text + "\n").encode())

    def wait(self, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.2)
        if self.proc.poll() is None:
            self.close()
            raise AssertionError(f"process still running after {timeout}s; output:\n{self.seen}")
        while self._read(0.05) and select.select([self.master], [], [], 0)[0]:
            pass
        return self.proc.returncode

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        with contextlib.suppress(OSError):
            os.close(self.master)
