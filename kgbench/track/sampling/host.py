"""The host's CPU while a job measures: the whole machine, the job's own processes, and what is left for others.

Sampled every `interval_s` in a thread, like GpuSampler, so that any time window inside the sampled span (a job's
measurement windows) gets its own figures: host CPU busy (share of all cores), CPU steal, the front end's cores
(the kgserve process itself: its event loop is one thread), the engines' cores (kgserve's child processes) and the
CPU that processes outside the job used (busy minus the job's tree: another job or user on a shared node).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from kgbench.track.sampling.samples import Sampler, bracket

__all__ = ["HostSample", "HostSampler"]

_MAX_READ_S = 0.25  # a read slower than this (the thread lost the GIL or the CPU meanwhile) is dropped


@dataclass(frozen=True)
class HostSample:
    t: float  # time.monotonic()
    busy_s: float  # CPU seconds all cores spent not idle (user, system, irq, steal...) since boot
    steal_s: float
    frontend_s: float  # CPU seconds of the front-end process (kgserve), 0 when there is none
    engines_s: float  # CPU seconds of its children (the engines; with no front end: this process's children)
    own_s: float  # CPU seconds of this process (the load generator) and its other children


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def _tree_cpu(process: psutil.Process | None) -> tuple[float, float]:
    """(the process's own CPU seconds, its descendants' CPU seconds); (0, 0) when it is gone."""
    if process is None:
        return 0.0, 0.0
    try:
        own = _cpu(process)
        children = 0.0
        for child in process.children(recursive=True):
            try:
                children += _cpu(child)
            except psutil.Error:
                continue  # a child that exited between the listing and the read
        return own, children
    except psutil.Error:
        return 0.0, 0.0


class HostSampler(Sampler[HostSample]):
    """`with HostSampler(lambda: kgserve_pid) as host: ...` then `host.metrics(start, end)`."""

    thread_name = "host-sampler"

    def __init__(self, frontend_pid: Callable[[], int | None] = lambda: None, interval_s: float = 0.5) -> None:
        super().__init__(interval_s)
        self.cores = psutil.cpu_count() or 1
        self._frontend_pid = frontend_pid
        self._frontend: psutil.Process | None = None
        self._me = psutil.Process(os.getpid())

    def _process(self) -> psutil.Process | None:
        pid = self._frontend_pid()
        if pid is None:
            return None
        if self._frontend is None or self._frontend.pid != pid:
            try:
                self._frontend = psutil.Process(pid)
            except psutil.Error:
                return None
        return self._frontend

    def _read(self) -> HostSample | None:
        """A sample, or None when the reads were not close together in time: a thread that loses the GIL between
        reading the counters and the clock would pair a late clock with early counters."""
        before = time.monotonic()
        times = psutil.cpu_times()
        # guest time is already inside user/nice on Linux: summing every field would count it twice
        busy = sum(getattr(times, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq", "steal"))
        front = self._process()
        frontend, engines = _tree_cpu(front)
        own, own_children = _tree_cpu(self._me)
        if front is None:
            # no front end: the engines are this process's own children (the direct transport, an engine's pipe)
            engines, own_rest = own_children, own
        else:
            # this process's children include the front end and its engines when it started them: count them once
            own_rest = own + max(0.0, own_children - frontend - engines)
        after = time.monotonic()
        if after - before > _MAX_READ_S:
            return None
        steal = getattr(times, "steal", 0.0)
        return HostSample((before + after) / 2, busy, steal, frontend, engines, own_rest)

    def metrics(self, start: float | None = None, end: float | None = None) -> dict[str, float]:
        """Over [start, end]: host_cpu_busy_pct (of all cores), host_cpu_steal_pct, frontend_cpu_cores,
        engine_cpu_cores, loadgen_cpu_cores and other_cpu_cores (busy minus the job's own processes)."""
        inside = bracket(self.samples, start, end)
        if len(inside) < 2 or inside[-1].t <= inside[0].t:
            return {}
        first, last = inside[0], inside[-1]
        span = last.t - first.t
        busy = min(float(self.cores), (last.busy_s - first.busy_s) / span)  # the kernel's ticks overshoot a little
        frontend = max(0.0, last.frontend_s - first.frontend_s) / span
        engines = max(0.0, last.engines_s - first.engines_s) / span
        own = max(0.0, last.own_s - first.own_s) / span
        return {
            "host_cpu_busy_pct": 100.0 * busy / self.cores,
            "host_cpu_steal_pct": 100.0 * (last.steal_s - first.steal_s) / span / self.cores,
            "frontend_cpu_cores": frontend,
            "engine_cpu_cores": engines,
            "loadgen_cpu_cores": own,
            "other_cpu_cores": max(0.0, busy - frontend - engines - own),
            "host_cores": float(self.cores),
        }
