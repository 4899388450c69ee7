"""What a job's machine did while its load ran: the GPU and the host sampled together (MeasureWatch), then the
efficiency figures and the bottleneck over the headline level's measurement windows (kgbench.track.efficiency).

    with MeasureWatch(frontend_pid=lambda: proc.pid) as watch:
        result = asyncio.run(run_load(...))
    metrics, tags = watch.job_figures(result, nn_stats, net=..., gemm=..., nn_max_batch=..., workers=...)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from types import TracebackType

from kgbench.load.types import LoadResult
from kgbench.nets import NetDescription
from kgbench.track.efficiency import JobFigures, bottleneck, efficiency_metrics
from kgbench.track.gemm import GemmRate
from kgbench.track.gpu import GpuSampler
from kgbench.track.host import HostSampler
from kgbench.track.schema import BOTTLENECK, BOTTLENECK_FIGURES, BOTTLENECK_KNOB, GPU_METRICS_ABSENT, MFU_ABSENT

__all__ = ["MeasureWatch", "headline_window"]


def headline_window(result: LoadResult, t0: float) -> tuple[float, float, int] | None:
    """(start, end, successes) of the headline level's measurement windows in time.monotonic() terms, `t0` being
    when the load run started (records carry run-relative times); None when no request was measured."""
    head = result.headline()
    if head is None:
        return None
    done = [
        t0 + r.send_s + r.latency_ms / 1000.0
        for r in result.records
        if r.level == head.concurrency and r.phase == "measure" and r.error is None
    ]
    if len(done) < 2:
        return None
    return min(done), max(done), len(done)


class MeasureWatch:
    def __init__(self, frontend_pid: Callable[[], int | None] = lambda: None, interval_s: float = 0.5) -> None:
        self.gpu = GpuSampler(interval_s=interval_s)
        self.host = HostSampler(frontend_pid, interval_s=interval_s)
        self.t0 = 0.0

    def __enter__(self) -> MeasureWatch:
        self.gpu.__enter__()
        self.host.__enter__()
        self.t0 = time.monotonic()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.host.__exit__(exc_type, exc, tb)
        self.gpu.__exit__(exc_type, exc, tb)

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
        window = headline_window(result, self.t0)
        head = result.headline()
        if window is None or head is None:
            return metrics, tags
        start, end, successes = window
        answered = sum(1 for r in result.records if r.error is None)
        figures = JobFigures(
            req_per_s=head.req_per_s,
            analyses_in_windows=successes,
            gpu=self.gpu.metrics(start, end),
            host=self.host.metrics(start, end),
            nn_rows=nn.get("nn_rows"),
            answered_total=answered or None,
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
