"""Device memory of the simulated GPU, shared by every sim process using the same KGSERVE_SIM_DEVICE.

Each process records its allocation (GB) under its pid in a small JSON file next to the device's time
reservations (fcntl-locked); entries of processes that no longer exist are dropped. A process whose
allocation does not fit next to the live ones fails at start-up like a CUDA out-of-memory error.

The same table says who shares the device (`device_holders`): the live sim processes on it, as NVML lists the
compute processes on a real GPU. kgbench reads it to flag a job measured while another sim shared its device.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from pathlib import Path

from kgserve.engine.procutil import pid_alive as _alive

__all__ = ["DeviceMemory", "device_holders"]


def _table_path(device: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in device)
    return Path(tempfile.gettempdir()) / f"kgserve-sim-device-{safe}.mem.json"


def _parse(raw: bytes) -> dict[int, float]:
    try:
        return {int(k): float(v) for k, v in json.loads(raw or b"{}").items()}
    except (ValueError, TypeError, AttributeError):
        return {}


def device_holders(device: str) -> dict[int, float]:
    """The live sim processes on the simulated device ``device`` -> the GB each holds ({} for "private": a
    private device is never shared, and for a device no sim has used)."""
    if device == "private":
        return {}
    try:
        fd = os.open(_table_path(device), os.O_RDONLY)
    except OSError:
        return {}
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        table = _parse(os.pread(fd, 1 << 20, 0))
    finally:
        os.close(fd)
    return {pid: gb for pid, gb in table.items() if _alive(pid)}


class DeviceMemory:
    def __init__(self, device: str, capacity_gb: float) -> None:
        self.private = device == "private"
        self.capacity = capacity_gb
        self.path = _table_path(device)

    def _update(self, change: float | None) -> tuple[bool, float]:
        """Add (change > 0) or drop (None) this pid's allocation; returns (fits, GB used by other processes)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            table = _parse(os.pread(fd, 1 << 20, 0))
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
