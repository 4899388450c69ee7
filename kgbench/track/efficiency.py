"""How well a job used the machine: NN evaluations and FLOP/s, MFU, joules per analysis, and the bottleneck.

Pure functions over figures the job measured (kgbench/track/sampling/gpu.py and host.py over its measurement windows,
the engines' NN statistics from their exit log, the net's FLOPs from kgbench.nets, the device's measured matrix rate).
The bottleneck is one word with the figures that decided it (docs/gpu-h100.md, "Efficiency and bottleneck"):

- gpu:      the GPU was busy (kernels running) >= GPU_BUSY_PCT of the windows and its FLOPs reached >= KERNELS_MFU of
            its measured matrix rate: the device's arithmetic is the limit; more work per batch, not more threads
- kernels:  busy as much, but below KERNELS_MFU: the device runs kernels far from its matrix rate (small matrices,
            attention, many short launches: KataGo v1.17's transformer path); a build's kernels are the limit
            (docs/qualify.md, "The bottleneck": the threshold and the figures that chose it)
- frontend: the kgserve process used >= FRONTEND_CORES cores per front-end worker (its event loop is one thread)
- host:     the host's cores were >= HOST_BUSY_PCT busy (search threads, NN server threads, front end, load)
- batching: none of these: the GPU waited for work the host could have prepared (too few positions in flight for
            nnMaxBatchSize x numNNServerThreadsPerModel, or small batches)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "FRONTEND_CORES",
    "GPU_BUSY_PCT",
    "HOST_BUSY_PCT",
    "KERNELS_MFU",
    "Bottleneck",
    "JobFigures",
    "bottleneck",
    "efficiency_metrics",
]

GPU_BUSY_PCT = 85.0
# busy GPUs measured on the H100 (2026-11-25): b40c768nbt at MFU 0.37-0.50, the KaTrain transformer at 0.07-0.09;
# 0.2 sits between them (about their geometric mean) with a factor of two to spare on either side
KERNELS_MFU = 0.2
HOST_BUSY_PCT = 85.0
FRONTEND_CORES = 0.85

_KNOBS = {
    "gpu": "the GPU is the limit: bigger batches (nnMaxBatchSize), FP16/NHWC (cudaUseFP16, cudaUseNHWC), TensorRT",
    "kernels": "the build's kernels are the limit (the GPU is busy far below its matrix rate): bigger batches "
    "(nnMaxBatchSize), another build (KataGo v1.18's CUDA transformer kernels, TensorRT), or a net with larger "
    "matrices per kernel",
    "frontend": "kgserve's front end is the limit: server.workers > 1, or fewer bytes per answer",
    "host": "the host's cores are the limit: fewer search threads per analysis, fewer NN server threads, "
    "or a bigger host share",
    "batching": "the GPU waits for work: more positions in flight (numAnalysisThreads x "
    "numSearchThreadsPerAnalysisThread up to nnMaxBatchSize x numNNServerThreadsPerModel), more NN server threads",
}


@dataclass(frozen=True)
class JobFigures:
    """What a job measured, over its headline level's measurement windows unless said otherwise."""

    req_per_s: float
    analyses_in_windows: int  # successful answers inside the windows the GPU energy covers
    gpu: Mapping[str, float]  # GpuSampler.metrics(windows): gpu_util_mean, gpu_energy_j, ...; {} without NVML
    host: Mapping[str, float]  # HostSampler.metrics(windows)
    nn_evals_per_s: float | None = None  # NN evaluations per second in the windows, by `nn_evals_basis`
    nn_evals_basis: str = ""  # "rows": the engine's own NN row count / its answers; "visits": search visits/s
    nn_rows: float | None = None  # NN evaluations over the whole run (the engine's exit log), warm-up included
    answered_total: int | None = None  # answers over the whole run, the denominator of nn_rows
    nn_avg_batch: float | None = None
    nn_max_batch: int | None = None  # nnMaxBatchSize
    flops_per_eval: float | None = None  # kgbench.nets: the net's FLOPs per evaluation on the board in use
    gemm_tflops: float | None = None  # the device's measured dense FP16 matrix-product rate
    datasheet_tflops: float | None = None
    frontend_workers: int = 1


@dataclass(frozen=True)
class Bottleneck:
    kind: str  # gpu | kernels | frontend | host | batching
    reason: str  # the figures that decided it
    knob: str  # what would move it


def bottleneck(f: JobFigures) -> Bottleneck:
    gpu_busy = f.gpu.get("gpu_util_mean")
    host_busy = f.host.get("host_cpu_busy_pct")
    frontend = f.host.get("frontend_cpu_cores")
    fill = _fill(f)
    mfu = efficiency_metrics(f).get("mfu")
    figures = ", ".join(
        part
        for part in (
            f"GPU busy {gpu_busy:.0f}%" if gpu_busy is not None else "no GPU figures",
            f"MFU {mfu:.2f}" if mfu is not None and gpu_busy is not None else "",
            f"host CPU {host_busy:.0f}% of {f.host.get('host_cores', 0):.0f} cores" if host_busy is not None else "",
            f"kgserve {frontend:.2f} cores/{f.frontend_workers} worker(s)" if frontend is not None else "",
            f"NN batch fill {fill:.0%}" if fill is not None else "",
        )
        if part
    )
    if gpu_busy is not None and gpu_busy >= GPU_BUSY_PCT:
        kind = "kernels" if mfu is not None and mfu < KERNELS_MFU else "gpu"
    elif frontend is not None and frontend >= FRONTEND_CORES * f.frontend_workers:
        kind = "frontend"
    elif host_busy is not None and host_busy >= HOST_BUSY_PCT:
        kind = "host"
    else:
        kind = "batching"
    return Bottleneck(kind, figures, _KNOBS[kind])


def _fill(f: JobFigures) -> float | None:
    if f.nn_avg_batch is None or not f.nn_max_batch:
        return None
    return f.nn_avg_batch / f.nn_max_batch


def efficiency_metrics(f: JobFigures) -> dict[str, float]:
    """The figures MLflow gets next to req/s; a figure whose inputs are missing is left out, never zero."""
    out: dict[str, float] = {}
    evals_per_s = f.nn_evals_per_s
    if evals_per_s is None and f.nn_rows and f.answered_total:  # an engine that answered everything it was sent
        evals_per_s = f.req_per_s * f.nn_rows / f.answered_total
    if evals_per_s is not None:
        out["nn_evals_per_s"] = evals_per_s
        if f.req_per_s > 0:
            out["nn_evals_per_analysis"] = evals_per_s / f.req_per_s
        if f.flops_per_eval:
            flops = out["nn_evals_per_s"] * f.flops_per_eval
            out["achieved_tflops"] = flops / 1e12
            if f.gemm_tflops:
                out["mfu"] = flops / (f.gemm_tflops * 1e12)
            if f.datasheet_tflops:
                out["mfu_datasheet"] = flops / (f.datasheet_tflops * 1e12)
    energy = f.gpu.get("gpu_energy_j")
    if energy is not None and f.analyses_in_windows > 0:
        out["gpu_j_per_analysis"] = energy / f.analyses_in_windows
        out["analyses_per_kj"] = 1000.0 * f.analyses_in_windows / energy if energy > 0 else math.nan
    for key in ("gpu_util_mean", "gpu_power_mean_w", "gpu_sm_clock_mean_mhz"):
        if key in f.gpu:
            out[f"windows_{key}"] = f.gpu[key]
    for key in ("host_cpu_busy_pct", "host_cpu_steal_pct", "frontend_cpu_cores", "engine_cpu_cores", "other_cpu_cores"):
        if key in f.host:
            out[key] = f.host[key]
    if (fill := _fill(f)) is not None:
        out["nn_batch_fill"] = fill
    return {k: v for k, v in out.items() if not math.isnan(v)}
