"""The process that owns something running (an Optuna trial's lease, a sweep's MLflow runs): its host, pid and start
time, so that another process can tell it is gone. A pid alone is not enough: a later process may reuse it, and its
start time then differs.

Told only on the owner's own host (the process table is local): elsewhere `gone` says it cannot tell, and the
caller decides by other means (a lease's expiry, kgbench.search.lease).

A top-level module: kgbench.search and kgbench.track, which may not import each other, both use it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

import psutil

__all__ = ["START_TOLERANCE_S", "Owner"]

START_TOLERANCE_S = 1.0  # a process's start time as psutil reads it twice


@dataclass(frozen=True)
class Owner:
    """A process: its host, pid and start time (a pid reused by a later process is not it)."""

    host: str
    pid: int
    started: float

    @classmethod
    def me(cls) -> Owner:
        return cls(socket.gethostname(), os.getpid(), round(psutil.Process().create_time(), 3))

    @classmethod
    def of(cls, lease: Mapping[str, object]) -> Owner | None:
        try:
            return cls(str(lease["host"]), int(str(lease["pid"])), float(str(lease["started"])))
        except (KeyError, TypeError, ValueError):
            return None

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"

    def gone(self) -> bool | None:
        """True when this process is known to be gone (it ran on this host), None when that cannot be told here."""
        if self.host != socket.gethostname():
            return None
        try:
            started = psutil.Process(self.pid).create_time()
        except psutil.NoSuchProcess:
            return True
        except psutil.Error:  # no access to it: someone's live process
            return False
        return abs(started - self.started) > START_TOLERANCE_S
