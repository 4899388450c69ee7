"""GPU utilisation, memory and energy through NVML, sampled while a job measures. No GPU (or no NVML): nothing is
reported at all, so the metrics are absent rather than zero, and `GpuSampler.absent_reason` says why.

Energy comes from NVML's total-energy counter (millijoules since the driver loaded, Volta and newer), read at every
sample, so the energy of any time window inside the sampled span is the counter's difference across it: a job's
measurement windows, not its warm-up, give its joules per analysis.

`python -m kgbench.track.sampling.gpu -- CMD ...` runs CMD and prints what the GPU did meanwhile, as JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from kgbench.track.sampling.samples import Sampler, SamplerStopped, bracket

__all__ = ["GpuSample", "GpuSampler", "gpu_name", "nvml_absent_reason"]

_MAX_READ_S = 0.25  # a read slower than this (the thread lost the GIL or the CPU meanwhile) is dropped


def _nvml() -> tuple[Any | None, str]:
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py (pynvml) is not installed"
    try:
        pynvml.nvmlInit()
        if pynvml.nvmlDeviceGetCount() < 1:
            return None, "NVML sees no GPU"
        return pynvml, ""
    except Exception as exc:  # no driver, no device: both mean "no GPU here"
        return None, f"NVML unavailable ({type(exc).__name__}: {exc})"


def nvml_absent_reason() -> str:
    """'' when NVML and a GPU are present, else why the GPU metrics of a run are absent."""
    return _nvml()[1]


def gpu_name(index: int = 0) -> str | None:
    nvml, _ = _nvml()
    if nvml is None:
        return None
    try:
        name = nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(index))
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        return None


@dataclass(frozen=True)
class GpuSample:
    t: float  # time.monotonic()
    util: float  # % of the interval a kernel ran (NVML's "GPU utilization")
    mem_used_mb: float
    energy_mj: float | None  # total-energy counter; None where the GPU has none
    power_w: float | None
    sm_clock_mhz: float | None


class GpuSampler(Sampler[GpuSample]):
    """`with GpuSampler() as gpu: ...` then `gpu.metrics()` -> {gpu_util_mean, gpu_mem_peak_mb, ...} or {};
    `gpu.metrics(start, end)` for a window of time.monotonic() values inside the sampled span."""

    thread_name = "nvml-sampler"

    def __init__(self, index: int = 0, interval_s: float = 0.5) -> None:
        super().__init__(interval_s)
        self.index = index
        self._handle: Any = None
        self._nvml, self.absent_reason = _nvml()

    def _can_sample(self) -> bool:
        return self._nvml is not None

    def _prepare(self) -> bool:
        assert self._nvml is not None
        try:
            self._handle = self._nvml.nvmlDeviceGetHandleByIndex(self.index)
        except Exception as exc:
            self.absent_reason = f"NVML device {self.index}: {exc}"
            return False
        return True

    def _read(self) -> GpuSample | None:
        try:
            return self._read_nvml(self._handle)
        except Exception as exc:
            self.absent_reason = f"NVML stopped answering: {exc}"
            raise SamplerStopped from exc

    def _read_nvml(self, handle: Any) -> GpuSample | None:
        """A sample, or None when its reads were not close together in time (this thread lost the GIL between
        them: the energy counter would be paired with the wrong clock)."""
        nvml = self._nvml
        assert nvml is not None
        before = time.monotonic()
        util = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        used_mb = nvml.nvmlDeviceGetMemoryInfo(handle).used / (1024 * 1024)
        energy = _optional(lambda: float(nvml.nvmlDeviceGetTotalEnergyConsumption(handle)))
        power = _optional(lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0)
        clock = _optional(lambda: float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)))
        after = time.monotonic()
        if after - before > _MAX_READ_S:
            return None
        return GpuSample((before + after) / 2, util, used_mb, energy, power, clock)

    def metrics(self, start: float | None = None, end: float | None = None) -> dict[str, float]:
        """Mean utilisation, peak memory, energy (J) and mean power over [start, end] (default: everything)."""
        inside = bracket(self.samples, start, end)
        if not inside:
            return {}
        out = {
            "gpu_util_mean": sum(s.util for s in inside) / len(inside),
            "gpu_mem_peak_mb": max(s.mem_used_mb for s in inside),
        }
        clocks = [s.sm_clock_mhz for s in inside if s.sm_clock_mhz is not None]
        if clocks:
            out["gpu_sm_clock_mean_mhz"] = sum(clocks) / len(clocks)
        energy = [s for s in inside if s.energy_mj is not None]
        if len(energy) >= 2 and energy[-1].t > energy[0].t:
            joules = (energy[-1].energy_mj - energy[0].energy_mj) / 1000.0  # type: ignore[operator]
            power = joules / (energy[-1].t - energy[0].t)
            # the samples bracket the window: the window's energy is the mean power over its own length
            span = (end - start) if start is not None and end is not None else energy[-1].t - energy[0].t
            out["gpu_energy_j"] = power * span
            out["gpu_energy_span_s"] = span
            out["gpu_power_mean_w"] = power
        return out


def _optional(read: Any) -> Any:
    try:
        return read()
    except Exception:  # a counter this GPU or driver does not have
        return None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        print("usage: python -m kgbench.track.sampling.gpu -- CMD [ARG...]", file=sys.stderr)
        return 2
    with GpuSampler(interval_s=0.25) as gpu:
        started = time.monotonic()
        status = subprocess.call(args)
        wall = time.monotonic() - started
    report = {"command": args, "returncode": status, "wall_s": wall, **gpu.metrics()}
    if gpu.absent_reason:
        report["gpu_absent_reason"] = gpu.absent_reason
    print(json.dumps(report), file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
