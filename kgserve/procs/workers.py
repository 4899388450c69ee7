"""Several kgserve front-end processes on one port (`server.workers`), for loads one event loop cannot carry.

`python -m kgserve` with `server.workers: N` (N > 1) becomes a small supervisor: it reserves the port
(port 0: the kernel picks one) and starts N workers, `python -m kgserve ... --worker I/N`, each of which
binds the same port with SO_REUSEPORT (the kernel spreads new connections over them) and serves with its
share of the engines (`engine.processes` split as evenly as it goes), of `limits.max_inflight_queries`, of the
memory budget, of the per-client caps (rounded up) and of `engine.min_ready`. Each worker is a whole kgserve:
its own log lines, /readyz and /metrics (a scrape reaches one worker). SIGTERM / SIGINT to the supervisor go to
every worker (each drains as a single kgserve does); a worker that exits on its own stops the others and the
supervisor exits 1. A worker dies with its supervisor (parent-death signal), and its engines with it.
"""

from __future__ import annotations

import logging
import math
import signal
import socket
import subprocess
import sys
import time
from types import FrameType

from kgserve.engine.procutil import child_preexec
from kgserve.settings import Settings

__all__ = ["parse_worker", "supervise", "worker_settings"]

log = logging.getLogger("kgserve")
POLL_S = 0.2


def parse_worker(text: str) -> tuple[int, int]:
    """`I/N` (0 <= I < N) as (I, N); ValueError otherwise."""
    index, sep, count = text.partition("/")
    if not sep or not index.isdigit() or not count.isdigit() or not 0 <= int(index) < int(count):
        raise ValueError(f"--worker takes I/N with 0 <= I < N, got {text!r}")
    return int(index), int(count)


def worker_settings(settings: Settings, index: int, count: int) -> Settings:
    """The settings worker `index` of `count` serves with: its share of the engines and of the limits."""
    engine, limits = settings.engine, settings.limits
    share = engine.processes // count + (1 if index < engine.processes % count else 0)
    min_ready = None
    if engine.min_ready is not None:
        min_ready = max(1, min(share, math.ceil(engine.min_ready * share / engine.processes)))
    # the server-wide bounds are split; a client's share is too (the kernel spreads its connections over the
    # workers), rounded up so that a client is never held to less than its cap over all workers together
    shares = {
        "max_inflight_queries": max(1, limits.max_inflight_queries // count),
        "memory_budget_bytes": max(1 << 20, limits.memory_budget_bytes // count),
        "max_inflight_per_client": math.ceil(limits.max_inflight_per_client / count),
        "max_connections_per_client": math.ceil(limits.max_connections_per_client / count),
        "memory_per_client_bytes": max(1 << 20, math.ceil(limits.memory_per_client_bytes / count)),
        # 0 stays 0: each worker sizes its connection budget from its own file-descriptor limit
        "max_connections": math.ceil(limits.max_connections / count),
    }
    return settings.model_copy(
        update={
            "engine": engine.model_copy(update={"processes": share, "min_ready": min_ready}),
            "limits": limits.model_copy(update=shares),
        }
    )


def supervise(settings: Settings, reserved: socket.socket, argv: list[str]) -> int:
    """Start the workers (`python -m kgserve *argv --port P --worker I/N`) and wait for them."""
    count = settings.server.workers
    port = reserved.getsockname()[1]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "kgserve", *argv, "--port", str(port), "--worker", f"{index}/{count}"],
            stdin=subprocess.DEVNULL,
            preexec_fn=child_preexec(signal.SIGTERM),
        )
        for index in range(count)
    ]
    log.info("kgserve: %d workers (pids %s) on port %d", count, ", ".join(str(p.pid) for p in procs), port)
    stopping: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        while not stopping and all(proc.poll() is None for proc in procs):
            time.sleep(POLL_S)
        if not stopping:
            gone = next(proc for proc in procs if proc.poll() is not None)
            log.error("kgserve worker pid %d exited with status %s: stopping the others", gone.pid, gone.returncode)
            forward(signal.SIGTERM, None)
            stopping.clear()  # not a requested stop: exit 1 below
        deadline = time.monotonic() + settings.server.grace_period_s + 15.0
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        reserved.close()
    if not stopping:
        return 1
    return 0 if all(proc.returncode == 0 for proc in procs) else 1
