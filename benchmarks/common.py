"""What several benchmarks share besides kgbench's own helpers (kgbench.targets: kgserve and the sim as
targets; kgbench.track.machine: the machine line): a free port, a process's RSS."""

from __future__ import annotations

import socket

import psutil

__all__ = ["free_port", "rss_mb"]


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
