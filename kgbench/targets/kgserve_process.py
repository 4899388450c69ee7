"""kgserve as a subprocess of a kgbench job: start on a free loopback port, wait for /readyz, stop with
SIGTERM, and read the engines' exit statistics (`engine[i] stderr: NN rows: N` ...) from its log.

The one kgserve-process helper: kgbench jobs, the benchmark scripts (kgbench/bench) and the tests all start
kgserve through it.

kgserve's stdout and stderr go (merged) to one log file, read line by line as they come, so the port, an
`Unused key` warning and a start-up failure are seen at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import psutil

__all__ = ["JobFailure", "KgserveProcess", "find_unused_keys", "parse_nn_stats", "unused_key_reason"]

_LISTEN_RE = re.compile(r"kgserve listening on (http://\S+?):(\d+)\b")
_UNUSED_RE = re.compile(r"Unused key '([^']+)'")
MAX_LINES = 50_000
_NN_RE = re.compile(r"engine\[(\d+)\] stderr: .*?NN (rows|batches|avg batch size): (\S+)")


class JobFailure(RuntimeError):
    """A job that cannot produce figures; the message is the one-line failure reason."""


def find_unused_keys(text: str) -> list[str]:
    """Keys KataGo reported as `Unused key` (it ignores them and runs with its defaults)."""
    return sorted(set(_UNUSED_RE.findall(text)))


def unused_key_reason(keys: list[str]) -> str:
    """The one-line failure for keys KataGo warned about as `Unused key`."""
    names = ", ".join(map(repr, keys))
    return f"the engine warned 'Unused key' for {names}: KataGo ignored it and would run with its default"


def parse_nn_stats(text: str) -> dict[str, float]:
    """nn_rows, nn_batches (summed over engines) and nn_avg_batch_size (rows / batches) from kgserve's log.
    Empty when no engine printed its statistics (killed, or never started)."""
    per_engine: dict[int, dict[str, float]] = {}
    for index, kind, value in _NN_RE.findall(text):
        try:
            number = float(value)
        except ValueError:
            continue
        per_engine.setdefault(int(index), {})[kind] = number  # the last report of an engine wins
    rows = sum(stats.get("rows", 0.0) for stats in per_engine.values())
    batches = sum(stats.get("batches", 0.0) for stats in per_engine.values())
    if not per_engine or not any("rows" in stats for stats in per_engine.values()):
        return {}
    out = {"nn_rows": rows, "nn_batches": batches}
    if batches > 0:
        out["nn_avg_batch_size"] = rows / batches
    return out


class KgserveProcess:
    """`python -m kgserve --config CONFIG --port 0 [ARGS]` in `cwd` (default: ours), logging to `log_path`."""

    def __init__(
        self,
        config_path: Path,
        log_path: Path,
        env: Mapping[str, str] | None = None,
        *,
        args: Sequence[str] = (),
        cwd: Path | None = None,
    ) -> None:
        self.argv = [sys.executable, "-m", "kgserve", "--config", str(config_path), "--port", "0", *args]
        self.log_path = log_path
        self.env = {**os.environ, **(env or {})}
        self.cwd = cwd
        self.url: str | None = None
        self.unused_keys: list[str] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self._lines: deque[str] = deque(maxlen=MAX_LINES)  # the tail; the whole log is in log_path
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None
        self._log: TextIO | None = None

    # -- process --------------------------------------------------------------------------------------------
    def start(self) -> None:
        self._log = self.log_path.open("w", encoding="utf-8")
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=self.cwd,
        )
        self._reader = threading.Thread(target=self._read, name="kgserve-log", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None and self._log is not None
        for raw in iter(self.proc.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self._log.write(line + "\n")
            self._log.flush()
            with self._lock:
                self._lines.append(line)
                if self.url is None and (match := _LISTEN_RE.search(line)):
                    self.url = f"{match.group(1)}:{match.group(2)}"
                if (match := _UNUSED_RE.search(line)) and match.group(1) not in self.unused_keys:
                    self.unused_keys.append(match.group(1))

    def text(self) -> str:
        with self._lock:
            return "\n".join(self._lines)

    def lines(self) -> list[str]:
        """The log lines so far (the last MAX_LINES of them)."""
        with self._lock:
            return list(self._lines)

    def child_pids(self) -> list[int]:
        """Pids of kgserve's live child processes (its engines), from the process table, not from kgserve."""
        assert self.proc is not None
        try:
            return [child.pid for child in psutil.Process(self.proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def kill_tree(self) -> None:
        """SIGKILL kgserve and every process under it at once (chaos: the whole serving process dies). The tree
        is collected first: children outlive their parent."""
        assert self.proc is not None
        try:
            root = psutil.Process(self.proc.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.send_signal(signal.SIGKILL)

    def wait_listening(self, timeout_s: float = 60.0) -> str:
        """Block until kgserve logs its address and return it. Raises JobFailure when kgserve exits first or
        `timeout_s` passes."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        while self.url is None:
            code = self.proc.poll()
            if code is not None:
                self._join_reader()
                if self.url is not None:
                    break
                raise JobFailure(self._startup_reason(code))
            if time.monotonic() > deadline:
                raise JobFailure(f"kgserve did not log its address within {timeout_s:g} s")
            time.sleep(0.05)
        return self.url

    def _startup_reason(self, code: int) -> str:
        lines = [ln.strip() for ln in self.text().splitlines() if ln.strip()]
        cannot = next((ln for ln in lines if "cannot start" in ln or "Error" in ln), None)
        last = cannot or (lines[-1] if lines else "no output")
        return f"kgserve exited with status {code} before it was ready: {last}"

    def wait_ready(
        self, timeout_s: float = 60.0, note: Callable[[str], None] | None = None, note_every_s: float = 30.0
    ) -> tuple[float, dict[str, Any]]:
        """Block until /readyz says ready; returns (seconds since start, the /readyz JSON).
        Raises JobFailure when kgserve exits, an engine warns `Unused key`, an engine keeps failing to start,
        or `timeout_s` passes."""
        assert self.proc is not None
        started = time.monotonic()
        next_note = note_every_s
        last: dict[str, Any] = {}
        while True:
            elapsed = time.monotonic() - started
            if self.unused_keys:
                raise JobFailure(self.unused_key_reason())
            code = self.proc.poll()
            if code is not None:
                self._join_reader()
                if self.unused_keys:
                    raise JobFailure(self.unused_key_reason())
                raise JobFailure(self._startup_reason(code))
            if self.url is not None:
                status, body = self.get_json("/readyz")
                last = body or last
                if status == 200 and body.get("ready"):
                    return elapsed, body
                engines = body.get("engines") or []
                # out of device memory is not a flake: a restart with the same cfg runs out again
                oom = next((e for e in engines if "out of memory" in " ".join(e.get("last_stderr") or [])), None)
                if oom is not None:
                    tail = " | ".join(str(x) for x in (oom.get("last_stderr") or [])[-2:])
                    raise JobFailure(f"engine out of GPU memory with this cfg ({tail})")
                if any((e.get("restarts") or 0) >= 2 and e.get("state") != "ready" for e in engines):
                    tail = " | ".join(str(x) for x in (engines[0].get("last_stderr") or [])[-2:])
                    raise JobFailure(f"engine failed to start: {body.get('reason') or 'restarting'} ({tail})")
            if elapsed > timeout_s:
                reason = last.get("reason") if last else "no /readyz answer"
                raise JobFailure(f"kgserve not ready within {timeout_s:g} s (startup_timeout_s): {reason}")
            if note is not None and elapsed >= next_note:
                next_note += note_every_s
                note(
                    f"still starting after {elapsed:.0f} s ({last.get('reason') or 'waiting'}; "
                    "TensorRT builds its engine on a timing-cache miss: minutes for a big net)"
                )
            time.sleep(0.2)

    def unused_key_reason(self) -> str:
        return unused_key_reason(self.unused_keys)

    def get_json(self, path: str, timeout_s: float = 5.0) -> tuple[int, dict[str, Any]]:
        assert self.url is not None
        try:
            with urllib.request.urlopen(self.url + path, timeout=timeout_s) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            try:
                return exc.code, json.loads(exc.read() or b"{}")
            except ValueError:
                return exc.code, {}
        except (OSError, ValueError):
            return 0, {}

    def stop(self, grace_s: float = 30.0) -> int | None:
        """SIGTERM, wait (kgserve drains and its engines print their statistics), then kill."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s + 15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self._join_reader()
        return self.proc.returncode

    def _join_reader(self) -> None:
        if self._reader is not None:
            self._reader.join(timeout=10)
        if self._reader is not None and not self._reader.is_alive():
            if self._log is not None:
                self._log.close()
            if self.proc is not None and self.proc.stdout is not None:
                self.proc.stdout.close()
