"""What several benchmarks share besides kgbench's own helpers (kgbench.targets: kgserve and the sim as
targets; kgbench.track.machine: the machine line): a free port, a process's RSS, a run on simulated devices."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Coroutine
from typing import Any, TypeVar

import psutil

from kgbench.targets.sim import cleanup_devices

__all__ = ["free_port", "rss_mb", "run_on_sim"]

T = TypeVar("T")


def free_port() -> int:
    """A free loopback port, for a server that cannot bind port 0 itself (HAProxy)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_mb(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        return float(psutil.Process(pid).memory_info().rss) / 2**20
    except psutil.Error:
        return None


def run_on_sim(work: Coroutine[Any, Any, T]) -> T:
    """asyncio.run(work), then the simulated devices' state files its engines shared removed (kgbench.targets.sim),
    however it ended: a benchmark leaves nothing behind in the temporary folder."""
    try:
        return asyncio.run(work)
    finally:
        cleanup_devices()
