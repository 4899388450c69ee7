"""What a job's machine did while its load ran: the GPU and the host sampled together (MeasureWatch), then the
efficiency figures and the bottleneck over the headline level's measurement windows (kgbench.track.efficiency).

    with MeasureWatch(frontend_pid=lambda: proc.pid, device=sim_source("gpu0")) as watch:
        result = asyncio.run(run_load(...))
    metrics, tags = watch.job_figures(result, nn_stats, net=..., gemm=..., nn_max_batch=..., workers=...)
    verdict = watch.contention(result, load.window_s, settings)   # kgbench.track.contention

The device sampler (kgbench.track.sampling.devprocs) watches who else holds the job's accelerator: NVML's compute
processes on a GPU, the other sims on a simulated device.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from types import TracebackType

from kgbench.load.types import LoadResult
from kgbench.nets import NetDescription
from kgbench.track.contention import Contention, ContentionSettings, judge, measure_windows, window_figures
from kgbench.track.efficiency import JobFigures, bottleneck, efficiency_metrics
from kgbench.track.gemm import GemmRate
from kgbench.track.sampling.devprocs import DeviceProcessSampler, DeviceSource
from kgbench.track.sampling.gpu import GpuSampler
from kgbench.track.sampling.host import HostSampler
from kgbench.track.schema import BOTTLENECK, BOTTLENECK_FIGURES, BOTTLENECK_KNOB, GPU_METRICS_ABSENT, MFU_ABSENT

__all__ = ["MeasureWatch", "headline_spans", "over_spans"]


def headline_spans(result: LoadResult) -> tuple[list[tuple[float, float]], int]:
    """The headline level's measurement windows as time.monotonic() spans (one per repeat), and the successful
    answers they counted (what its req/s is made of)."""
    head = result.headline()
    if head is None:
        return [], 0
    spans = [(result.started_at + a, result.started_at + b) for a, b in head.measure_spans]
    successes = sum(
        1 for r in result.records if r.level == head.concurrency and r.phase == "measure" and r.error is None
    )
    return spans, successes


def over_spans(
    metrics_of: Callable[[float, float], Mapping[str, float]], spans: list[tuple[float, float]]
) -> dict[str, float]:
    """A sampler's figures over several spans: energies (`*_j`) summed, the rest weighted by span length."""
    parts = [(end - start, metrics_of(start, end)) for start, end in spans if end > start]
    total = sum(length for length, _ in parts)
    out: dict[str, float] = {}
    for key in {k for _, m in parts for k in m}:
        values = [(length, m[key]) for length, m in parts if key in m]
        if key.endswith("_j") or key.endswith("_span_s"):
            out[key] = sum(v for _, v in values)
        elif key.endswith("_peak_mb"):
            out[key] = max(v for _, v in values)
        elif total > 0:
            out[key] = sum(length * v for length, v in values) / sum(length for length, _ in values)
    return out


class MeasureWatch:
    def __init__(
        self,
        frontend_pid: Callable[[], int | None] = lambda: None,
        interval_s: float = 0.5,
        device: DeviceSource | None = None,
    ) -> None:
        self.gpu = GpuSampler(interval_s=interval_s)
        self.host = HostSampler(frontend_pid, interval_s=interval_s)
        self.device = DeviceProcessSampler(device, interval_s=interval_s)
        self.t0 = 0.0

    def __enter__(self) -> MeasureWatch:
        # a sampler that fails to start stops the ones already started (their threads would outlive the job)
        with contextlib.ExitStack() as started:
            started.enter_context(self.gpu)
            started.enter_context(self.host)
            started.enter_context(self.device)
            started.pop_all()
        self.t0 = time.monotonic()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.device.__exit__(exc_type, exc, tb)
        self.host.__exit__(exc_type, exc, tb)
        self.gpu.__exit__(exc_type, exc, tb)

    def contention(self, result: LoadResult, window_s: float, settings: ContentionSettings) -> Contention:
        """Every level's measurement windows judged for contention (kgbench.track.contention)."""
        spans = measure_windows(result, window_s)
        return judge(window_figures(spans, self.host.metrics, self.device.others, float(self.host.cores)), settings)

    def job_figures(
        self,
        result: LoadResult,
        nn: Mapping[str, float],
        *,
        net: NetDescription | None,
        gemm: GemmRate | None,
        nn_max_batch: int | None,
        workers: int = 1,
    ) -> tuple[dict[str, float], dict[str, str]]:
        """(metrics, tags): the whole run's GPU figures as before (gpu_util_mean, gpu_mem_peak_mb), then the
        windows' efficiency figures and the bottleneck; tags say why a figure is absent."""
        metrics = dict(self.gpu.metrics())
        tags: dict[str, str] = {}
        if self.gpu.absent_reason:
            tags[GPU_METRICS_ABSENT] = self.gpu.absent_reason
        spans, successes = headline_spans(result)
        head = result.headline()
        if not spans or head is None:
            return metrics, tags
        figures = JobFigures(
            req_per_s=head.req_per_s,
            analyses_in_windows=successes,
            gpu=over_spans(self.gpu.metrics, spans),
            host=over_spans(self.host.metrics, spans),
            # KataGo logs its NN rows only at exit, for the whole job, queries still in flight at shutdown included:
            # the windows' search visits stand for their evaluations (katago benchmark: 1.00-1.07 evals per visit)
            nn_evals_per_s=head.visits_per_s or None,
            nn_evals_basis="visits",
            nn_avg_batch=nn.get("nn_avg_batch_size"),
            nn_max_batch=nn_max_batch,
            flops_per_eval=net.flops() if net is not None else None,
            gemm_tflops=gemm.tflops if gemm is not None else None,
            datasheet_tflops=gemm.datasheet_tflops if gemm is not None else None,
            frontend_workers=workers,
        )
        metrics.update(efficiency_metrics(figures))
        verdict = bottleneck(figures)
        tags.update(
            {
                BOTTLENECK: verdict.kind,
                BOTTLENECK_FIGURES: verdict.reason,
                BOTTLENECK_KNOB: verdict.knob,
            }
        )
        if gemm is not None and gemm.tflops is None and gemm.reason:
            tags[MFU_ABSENT] = gemm.reason
        elif gemm is not None and gemm.tflops is not None:
            metrics["device_gemm_tflops"] = gemm.tflops
        return metrics, tags
