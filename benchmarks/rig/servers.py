"""The two servers benchmarks.hotpath compares, as subprocesses on loopback ports picked by the kernel.

kgserve's log goes straight to a file (not through a pipe read by the benchmark, whose reading would count
as client CPU): one INFO line per request, as in production.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import psutil

from kgbench.targets.kgserve_process import write_config
from kgserve.logformat import LISTENING_RE
from kgserve.paths import PROJECT_ROOT
from kgserve.settings import Settings

__all__ = ["ServerProcess", "bare_server", "defences_off", "kgserve_server", "serving_cpu_s", "standin_settings"]

START_TIMEOUT_S = 60.0


def serving_cpu_s(pid: int) -> float:
    """CPU seconds of the server process ``pid`` and of its kgserve workers if it has any (server.workers);
    the engines (children of kgserve) are not counted."""
    process = psutil.Process(pid)
    serving = [process] + [c for c in process.children() if "--worker" in c.cmdline()]
    return float(sum(p.cpu_times().user + p.cpu_times().system for p in serving))


@dataclass
class ServerProcess:
    proc: subprocess.Popen[bytes]
    url: str

    def cpu_s(self) -> float:
        """The server's own CPU seconds (serving_cpu_s)."""
        return serving_cpu_s(self.proc.pid)

    async def answer_bytes(self, body: bytes) -> int:
        """The size of the server's answer to ``body``."""
        async with aiohttp.ClientSession() as session, session.post(self.url + "/analysis", data=body) as response:
            payload = await response.read()
            if response.status != 200:
                raise RuntimeError(f"{self.url}: status {response.status}: {payload[:300]!r}")
            return len(payload)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextlib.contextmanager
def bare_server(size: int) -> Iterator[ServerProcess]:
    """benchmarks.rig.bare_asgi answering ``size`` bytes."""
    argv = [sys.executable, "-m", "benchmarks.rig.bare_asgi", "--bytes", str(size)]
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=PROJECT_ROOT
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        if not line.startswith("listening "):
            raise RuntimeError(f"the bare server did not start: {line!r}")
        yield ServerProcess(proc, f"http://127.0.0.1:{int(line.split()[1])}")
    finally:
        _stop(proc)
        if proc.stdout is not None:
            proc.stdout.close()


def standin_settings(settings: Settings) -> Settings:
    """``settings`` (backend sim) with its engine replaced by benchmarks.rig.standin_engine: canned answers."""
    engine = settings.engine
    sim = engine.backend_settings("sim")
    standin = sim.model_copy(update={"command": ["{python}", "-m", "benchmarks.rig.standin_engine"]})
    backends = {**engine.backends, "sim": standin}
    return settings.model_copy(update={"engine": engine.model_copy(update={"backends": backends})})


# kgserve's per-client defences and safety bounds (docs/http-limits.md), at a value that never engages: 0 where 0 is
# "no bound", else far past anything a benchmark sends. Priority classes are a feature, not a defence: left as shipped.
_UNBOUNDED = 1 << 40
_DEFENCES_OFF = {
    "limits": {
        "max_inflight_queries": 1 << 20,
        "max_inflight_per_client": 1 << 20,
        "max_connections_per_client": 1 << 20,
        "max_connections": 1 << 20,
        "max_requests_per_s_per_client": 0,
        "max_messages_per_s_per_client": 0,
        "max_partial_bytes_per_s": 0,
        "memory_budget_bytes": _UNBOUNDED,
        "memory_per_client_bytes": _UNBOUNDED,
    },
    "websocket": {"max_messages_per_s": 0},
    "engine": {"thread_reserve": 0.0},
}


def defences_off(settings: Settings) -> Settings:
    """``settings`` with every per-client cap, pacing, share and safety bound of kgserve's front end off (the
    comparison of issue 40: a lone client with the shipped defences on against the same kgserve without them)."""
    sections = {name: getattr(settings, name).model_copy(update=values) for name, values in _DEFENCES_OFF.items()}
    return settings.model_copy(update=sections)


def _ready(url: str) -> bool:
    with contextlib.suppress(OSError), urllib.request.urlopen(url + "/readyz", timeout=5) as response:
        return response.status == 200
    return False


@contextlib.contextmanager
def kgserve_server(
    settings: Settings, env: Mapping[str, str], *, limits_as_given: bool = False
) -> Iterator[ServerProcess]:
    """``python -m kgserve`` with ``settings`` (port 0), ready; SIGTERM on exit. Its limits are a lone load
    generator's (kgbench.targets.kgserve_process.one_client) unless ``limits_as_given``."""
    with tempfile.TemporaryDirectory(prefix="kgbench-hotpath-") as tmp:
        config = write_config(settings, Path(tmp), limits_as_given=limits_as_given)
        log_path = Path(tmp) / "kgserve.log"
        argv = [sys.executable, "-m", "kgserve", "--config", str(config), "--port", "0"]
        with log_path.open("wb") as log:
            # from the repository root, where `python -m benchmarks.rig.standin_engine` (the stand-in's argv) is found
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=dict(env), cwd=PROJECT_ROOT
            )
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            url = None
            while url is None or not _ready(url):
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = log_path.read_text(errors="replace")[-1500:]
                    raise RuntimeError(f"kgserve did not become ready (exit {proc.poll()}): {tail}")
                match = LISTENING_RE.search(log_path.read_text(errors="replace")) if url is None else None
                url = f"{match.group(1)}:{match.group(2)}" if match else url
                time.sleep(0.1)
            yield ServerProcess(proc, url)
        finally:
            _stop(proc)
