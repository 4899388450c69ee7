"""What a job knows of its device and network before it measures: the net's description (architecture, FLOPs per
evaluation, synthetic or not) and the GPU's measured matrix-product rate, both for the efficiency figures, and who
else may hold its device (for the contention check)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from kgbench.load.types import LoadResult
from kgbench.nets import ModelFormatError, NetDescription, describe_model
from kgbench.sweep.compose.spec import Prepared
from kgbench.track.gemm import GemmRate, device_gemm_rate
from kgbench.track.measure import MeasureWatch
from kgbench.track.sampling.devprocs import DeviceSource, backend_device
from kgbench.track.sampling.gpu import gpu_name
from kgbench.track.schema import NET_ARCH, NET_GFLOPS_PER_EVAL, NET_NAME, NET_PARAMS, SYNTHETIC_NET, flag
from kgserve.katago.netfile import is_synthetic_model

__all__ = ["GPU_BACKENDS", "job_device", "job_gemm", "job_net", "net_tags", "watch_figures"]

GPU_BACKENDS = ("cuda", "trt")
GEMM_CACHE = "device_gemm.json"


@lru_cache(maxsize=8)
def _describe(path: str, mtime_ns: int) -> NetDescription | None:
    try:
        return describe_model(Path(path))
    except (ModelFormatError, OSError):
        return None  # not a KataGo model file (the simulated engine's stand-in): no FLOPs, no efficiency


def job_net(model: Path) -> NetDescription | None:
    try:
        return _describe(str(model), model.stat().st_mtime_ns)
    except OSError:
        return None


def net_tags(model: Path, net: NetDescription | None) -> dict[str, str]:
    tags = {SYNTHETIC_NET: flag(is_synthetic_model(model))}
    if net is not None:
        tags[NET_NAME] = net.name
        tags[NET_ARCH] = net.architecture
        tags[NET_GFLOPS_PER_EVAL] = f"{net.flops() / 1e9:.4g}"
        tags[NET_PARAMS] = str(net.params)
    return tags


def job_gemm(backend: str, cache_dir: Path) -> GemmRate | None:
    """The GPU's measured FP16 rate for a GPU backend (measured once per sweep folder, before any engine starts);
    None for the CPU and simulated backends, which have no MFU."""
    if backend not in GPU_BACKENDS:
        return None
    return device_gemm_rate(cache_dir / GEMM_CACHE, gpu_name())


def job_device(backend: str) -> DeviceSource | None:
    """Who holds the job's accelerator (kgbench.track.sampling.devprocs.backend_device)."""
    return backend_device(backend)


def watch_figures(
    prepared: Prepared, watch: MeasureWatch, result: LoadResult, nn: dict[str, float], job_dir: Path
) -> tuple[dict[str, float], dict[str, str]]:
    """The job's efficiency figures and bottleneck (kgbench.track.measure) from what `watch` saw."""
    keys = prepared.rendered.keys
    batch = keys.get("nnMaxBatchSize")
    return watch.job_figures(
        result,
        nn,
        net=job_net(prepared.settings.engine.model_for(prepared.backend)),
        gemm=job_gemm(prepared.backend, job_dir.parent),
        nn_max_batch=int(batch) if isinstance(batch, int | float | str) and str(batch).isdigit() else None,
        workers=prepared.settings.server.workers,
    )
