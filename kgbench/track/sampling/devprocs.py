"""Other processes on the job's accelerator while it measures: NVML's compute processes on a real GPU, or the other
sim processes on the simulated device (KGSERVE_SIM_DEVICE, kgserve.sim.devmem.device_holders).

Sampled every `interval_s` in a thread, like the host and GPU samplers, so that each measurement window gets its own
count. A process is the job's own when it is this process or one of its descendants (kgserve, its engines); every
other holder of the device is another job's. Inside a container whose PID namespace NVML does not share, NVML's pids
name no process here: those are counted less one per process of the job's own tree (its engines may be among them).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from kgbench.track.sampling.samples import Sampler, bracket
from kgserve.sim.devmem import device_holders

__all__ = ["DeviceProcessSampler", "DeviceSource", "backend_device", "nvml_source", "sim_source"]

DeviceSource = Callable[[], set[int] | None]  # the pids on the device now, None when it cannot be read


@dataclass(frozen=True)
class DeviceSample:
    t: float  # time.monotonic()
    others: tuple[int, ...]  # pids of other jobs' processes on the device (0: one NVML cannot name)


def sim_source(device: str) -> DeviceSource | None:
    """The sim processes on the simulated device ``device``; None for a private device (never shared)."""
    if device == "private":
        return None
    return lambda: set(device_holders(device))


def nvml_source(index: int = 0) -> DeviceSource | None:
    """NVML's compute processes on GPU ``index``; None without NVML or a GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:  # no pynvml, no driver, no such device: no GPU to share
        return None

    def read() -> set[int] | None:
        try:
            return {int(p.pid) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)}
        except Exception:
            return None

    return read


def backend_device(backend: str) -> DeviceSource | None:
    """Who holds a backend's accelerator: the simulated device its sims use (KGSERVE_SIM_DEVICE, as they read it), or
    NVML's GPU 0 for a GPU backend; None for the CPU backend (its device is the host, which the host sampler sees)."""
    if backend == "sim":
        return sim_source(os.environ.get("KGSERVE_SIM_DEVICE", "gpu0") or "gpu0")
    if backend in ("cuda", "trt"):
        return nvml_source(0)
    return None


def _job_pids(me: psutil.Process) -> set[int]:
    try:
        return {me.pid, *(child.pid for child in me.children(recursive=True))}
    except psutil.Error:
        return {me.pid}


def foreign(device_pids: set[int], job: set[int]) -> tuple[int, ...]:
    """The device's pids that are not the job's; pids not visible here (another PID namespace) count as 0s, less
    one per process of the job beyond this one."""
    visible = {pid for pid in device_pids if psutil.pid_exists(pid)}
    hidden = len(device_pids - visible)
    anonymous = max(0, hidden - max(0, len(job) - 1)) if hidden and not (visible & job) else 0
    return tuple(sorted(visible - job)) + (0,) * anonymous


class DeviceProcessSampler(Sampler[DeviceSample]):
    """`with DeviceProcessSampler(source) as dev: ...` then `dev.others(start, end)`; a None source samples nothing."""

    thread_name = "device-processes"

    def __init__(self, source: DeviceSource | None, interval_s: float = 0.5) -> None:
        super().__init__(interval_s)
        self.source = source
        self._me = psutil.Process(os.getpid())

    def _can_sample(self) -> bool:
        return self.source is not None

    def _read(self) -> DeviceSample | None:
        assert self.source is not None
        pids = self.source()
        return None if pids is None else DeviceSample(time.monotonic(), foreign(pids, _job_pids(self._me)))

    def others(self, start: float | None = None, end: float | None = None) -> tuple[int, ...] | None:
        """The other jobs' pids seen on the device over [start, end] (the most seen at once: a list of that many,
        with every pid seen); None when nothing was sampled (no source, or it never answered)."""
        inside = bracket(self.samples, start, end)
        if not inside:
            return None
        most = max(len(s.others) for s in inside)
        seen = sorted({pid for s in inside for pid in s.others if pid})
        return tuple(seen) + (0,) * max(0, most - len(seen))
