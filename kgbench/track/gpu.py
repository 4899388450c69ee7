"""GPU utilisation and memory through NVML, sampled while a job measures. No GPU (or no NVML): nothing is
reported at all, so the metrics are absent rather than zero."""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any

__all__ = ["GpuSampler", "gpu_name"]


def _nvml() -> Any | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        if pynvml.nvmlDeviceGetCount() < 1:
            return None
        return pynvml
    except Exception:  # no library, no driver, no device: all mean "no GPU here"
        return None


def gpu_name(index: int = 0) -> str | None:
    nvml = _nvml()
    if nvml is None:
        return None
    try:
        name = nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(index))
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        return None


class GpuSampler:
    """`with GpuSampler() as gpu: ...` then `gpu.metrics()` -> {gpu_util_mean, gpu_mem_peak_mb} or {}."""

    def __init__(self, index: int = 0, interval_s: float = 0.5) -> None:
        self.index = index
        self.interval_s = interval_s
        self.util: list[float] = []
        self.mem_peak_mb: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml = _nvml()

    def __enter__(self) -> GpuSampler:
        if self._nvml is not None:
            self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        nvml = self._nvml
        assert nvml is not None
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(self.index)
        except Exception:
            return
        while not self._stop.is_set():
            try:
                self.util.append(float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
                used_mb = nvml.nvmlDeviceGetMemoryInfo(handle).used / (1024 * 1024)
                self.mem_peak_mb = max(self.mem_peak_mb or 0.0, used_mb)
            except Exception:
                return
            self._stop.wait(self.interval_s)

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.util:
            out["gpu_util_mean"] = sum(self.util) / len(self.util)
        if self.mem_peak_mb is not None:
            out["gpu_mem_peak_mb"] = self.mem_peak_mb
        return out
