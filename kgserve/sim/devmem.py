"""Device memory of the simulated GPU, shared by every sim process using the same KGSERVE_SIM_DEVICE.

Each process records its allocation (GB) under its pid in a small JSON file next to the device's time
reservations (fcntl-locked); entries of processes that no longer exist are dropped. A process whose
allocation does not fit next to the live ones fails at start-up like a CUDA out-of-memory error.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from pathlib import Path

from kgserve.engine.procutil import pid_alive as _alive

__all__ = ["DeviceMemory"]


class DeviceMemory:
    def __init__(self, device: str, capacity_gb: float) -> None:
        self.private = device == "private"
        self.capacity = capacity_gb
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in device)
        self.path = Path(tempfile.gettempdir()) / f"kgserve-sim-device-{safe}.mem.json"

    def _update(self, change: float | None) -> tuple[bool, float]:
        """Add (change > 0) or drop (None) this pid's allocation; returns (fits, GB used by other processes)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.pread(fd, 1 << 20, 0)
            try:
                table = {int(k): float(v) for k, v in json.loads(raw or b"{}").items()}
            except (ValueError, TypeError, AttributeError):
                table = {}
            me = os.getpid()
            table = {pid: gb for pid, gb in table.items() if pid != me and _alive(pid)}
            others = sum(table.values())
            fits = change is None or others + change <= self.capacity
            if change is not None and fits:
                table[me] = change
            data = json.dumps({str(k): v for k, v in table.items()}).encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
            return fits, others
        finally:
            os.close(fd)

    def allocate(self, need_gb: float) -> tuple[bool, float]:
        if self.private:
            return need_gb <= self.capacity, 0.0
        return self._update(need_gb)

    def free(self) -> None:
        if not self.private:
            self._update(None)
