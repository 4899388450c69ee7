"""kgserve as a subprocess: start on a free loopback port, wait for /readyz, stop with SIGTERM, and keep its log
(the engines' stderr lines in it: kgbench.targets.enginelog reads their exit statistics and `Unused key` warnings).

The one kgserve-process helper: kgbench jobs (kgbench.targets.http), `python -m kgbench.promote --verify`, the
benchmarks (benchmarks/) and the tests all start kgserve through it; `kgserve_running` is it as a context manager,
with a config file of its own (the benchmarks': `one_client`).

kgserve cannot outlive the process that started it: a parent-death signal and a watchdog on its parent's pid
(`KgserveProcess.start`, kgserve.procs.parent), so a sweep killed with SIGKILL leaves no kgserve or engine behind.

kgserve's stdout and stderr go (merged) to one log file, read line by line as they come, so the port, an
`Unused key` warning and a start-up failure are seen at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import psutil
import yaml

from kgbench.targets.base import TargetError
from kgbench.targets.enginelog import MAX_LINES, UNUSED_KEY, unused_key_reason
from kgserve.engine.procutil import child_preexec
from kgserve.logformat import LISTENING_RE
from kgserve.procs.parent import ENV_PARENT_PID
from kgserve.settings import Settings

__all__ = ["KgserveProcess", "engine_pids", "kgserve_running", "one_client", "write_config"]


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
        """Start kgserve, bound to this process: it cannot outlive it (`_die_with_us`)."""
        self._log = self.log_path.open("w", encoding="utf-8")
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**self.env, ENV_PARENT_PID: str(os.getpid())},
            cwd=self.cwd,
            preexec_fn=_die_with_us(),
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
                if self.url is None and (match := LISTENING_RE.search(line)):
                    self.url = f"{match.group(1)}:{match.group(2)}"
                if (match := UNUSED_KEY.search(line)) and match.group(1) not in self.unused_keys:
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
        """Block until kgserve logs its address and return it. Raises TargetError when kgserve exits first or
        `timeout_s` passes."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        while self.url is None:
            code = self.proc.poll()
            if code is not None:
                self._join_reader()
                if self.url is not None:
                    break
                raise TargetError(self._startup_reason(code))
            if time.monotonic() > deadline:
                raise TargetError(f"kgserve did not log its address within {timeout_s:g} s")
            time.sleep(0.05)
        return self.url

    def _startup_reason(self, code: int) -> str:
        lines = [ln.strip() for ln in self.text().splitlines() if ln.strip()]
        # kgserve's own verdict first (a cfg it will not serve, an engine refusing every start: docs/cfg.md)
        verdict = next((ln for ln in lines if "will not serve the KataGo cfg" in ln or "kgserve stops:" in ln), None)
        cannot = verdict or next((ln for ln in lines if "cannot start" in ln or "Error" in ln), None)
        last = cannot or (lines[-1] if lines else "no output")
        return f"kgserve exited with status {code} before it was ready: {last}"

    def wait_ready(
        self, timeout_s: float = 60.0, note: Callable[[str], None] | None = None, note_every_s: float = 30.0
    ) -> tuple[float, dict[str, Any]]:
        """Block until /readyz says ready; returns (seconds since start, the /readyz JSON).
        Raises TargetError when kgserve exits, an engine warns `Unused key`, an engine keeps failing to start,
        or `timeout_s` passes."""
        assert self.proc is not None
        started = time.monotonic()
        next_note = note_every_s
        last: dict[str, Any] = {}
        while True:
            elapsed = time.monotonic() - started
            if self.unused_keys:
                raise TargetError(self.unused_key_reason())
            code = self.proc.poll()
            if code is not None:
                self._join_reader()
                if self.unused_keys:
                    raise TargetError(self.unused_key_reason())
                raise TargetError(self._startup_reason(code))
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
                    raise TargetError(f"engine out of GPU memory with this cfg ({tail})")
                if any((e.get("restarts") or 0) >= 2 and e.get("state") != "ready" for e in engines):
                    tail = " | ".join(str(x) for x in (engines[0].get("last_stderr") or [])[-2:])
                    raise TargetError(f"engine failed to start: {body.get('reason') or 'restarting'} ({tail})")
            if elapsed > timeout_s:
                reason = last.get("reason") if last else "no /readyz answer"
                raise TargetError(f"kgserve not ready within {timeout_s:g} s (startup_timeout_s): {reason}")
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


def _die_with_us() -> Callable[[], None] | None:
    """kgserve gets SIGTERM (a graceful stop: its engines die with it, kgserve.engine.procutil) when this process
    dies, even by SIGKILL, where no handler of ours runs. Linux sends the parent-death signal when the *thread* that
    started the child ends, not the process: set only when that thread is the main thread, which lives as long as
    the process. From any other thread (a harness's worker) kgserve relies on its watchdog on our pid alone
    (KGSERVE_PARENT_PID, kgserve.procs.parent), which also covers systems without the signal."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return child_preexec(signal.SIGTERM)


def one_client(data: dict[str, Any]) -> None:
    """The benchmarks' kgserve config (`write_config`, `kgserve_running`: harnesses of the serving layer itself) for
    a load generator that is its only client: the per-client caps (issue 27) as wide as the server-wide ones, no
    bound on its requests a second (its request rate is what is measured), and no thread reserve. A sweep job's
    kgserve is NOT made so: it serves the runtime's settings, with only what its load generator needs changed and
    recorded (kgbench.targets.serving)."""
    data.setdefault("engine", {})["thread_reserve"] = 0.0
    limits = data.setdefault("limits", {})
    limits["max_inflight_per_client"] = limits["max_inflight_queries"]
    limits["max_connections_per_client"] = 1 << 16
    limits["memory_per_client_bytes"] = limits.get("memory_budget_bytes", 256 << 20)
    limits["max_requests_per_s_per_client"] = 0  # its request rate is what is measured


def write_config(
    settings: Settings, directory: Path, *, max_inflight: int = 4096, limits_as_given: bool = False
) -> Path:
    """A kgserve config file with absolute paths, loopback, port 0, no auth, one client (`one_client`);
    `limits_as_given`: every limit as ``settings`` has them (benchmarks.hotpath --defences: the shipped ones)."""
    data: dict[str, Any] = settings.model_dump(mode="json")
    data["server"].update(host="127.0.0.1", port=0, auth_token_env=None)
    if not limits_as_given:
        data.setdefault("limits", {})["max_inflight_queries"] = max_inflight
        one_client(data)
    path = directory / "kgserve_bench.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@contextlib.contextmanager
def kgserve_running(
    settings: Settings, env: Mapping[str, str], *, max_inflight: int = 4096, ready_timeout_s: float = 90.0
) -> Iterator[KgserveProcess]:
    """A real ``python -m kgserve`` subprocess with ``settings`` on a free loopback port, ready; stopped (SIGTERM)
    on exit."""
    with tempfile.TemporaryDirectory(prefix="kgbench-kgserve-") as tmp:
        config = write_config(settings, Path(tmp), max_inflight=max_inflight)
        proc = KgserveProcess(config, Path(tmp) / "kgserve.log", env)
        proc.start()
        try:
            proc.wait_ready(ready_timeout_s)
            yield proc
        finally:
            proc.stop(grace_s=5.0)
            if proc.proc is not None and proc.proc.stdout is not None:
                proc.proc.stdout.close()


def engine_pids(proc: KgserveProcess, ready_only: bool = False) -> list[int]:
    """Pids of kgserve's live engines (``ready_only``: of those in state ready), from /readyz."""
    _, body = proc.get_json("/readyz")
    engines = body.get("engines") or []
    return [int(e["pid"]) for e in engines if e.get("pid") and (not ready_only or e.get("state") == "ready")]
