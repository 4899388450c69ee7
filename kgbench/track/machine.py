"""The machine a figure was measured on, in one line for a results table: when, host, CPU, cores, memory, Python,
and the setting (what shared the machine, which engine)."""

from __future__ import annotations

import contextlib
import datetime as dt
import platform
import socket
from pathlib import Path

import psutil

__all__ = ["machine_line"]


def machine_line(setting: str = "load generator included, loopback, simulated engine") -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = psutil.virtual_memory().total / 2**30
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{now} · {socket.gethostname()} · {cpu} · {psutil.cpu_count()} logical CPUs · {mem:.0f} GiB RAM · "
        f"Python {platform.python_version()} · {setting}"
    )
