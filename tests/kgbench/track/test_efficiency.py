"""kgbench.track.efficiency: the figures a job's machine work becomes, and the one-word bottleneck."""

from __future__ import annotations

import pytest

from kgbench.track.efficiency import KERNELS_MFU, JobFigures, bottleneck, efficiency_metrics
from kgbench.track.measure import over_spans

GPU_BUSY = {"gpu_util_mean": 96.0, "gpu_energy_j": 680.0 * 6, "gpu_power_mean_w": 680.0}
HOST_QUIET = {"host_cpu_busy_pct": 12.0, "host_cores": 16.0, "frontend_cpu_cores": 0.02}


def test_mfu_energy_and_batch_fill_from_what_a_b40_job_measured() -> None:
    """The figures of the H100 b40c768nbt job (docs/gpu-h100.md): 21.5 analyses/s at 100 visits, 2,150 visits/s."""
    f = JobFigures(
        req_per_s=21.5,
        analyses_in_windows=129,
        gpu=GPU_BUSY,
        host=HOST_QUIET,
        nn_evals_per_s=2150.0,
        nn_evals_basis="visits",
        nn_avg_batch=89.0,
        nn_max_batch=128,
        flops_per_eval=166.586e9,
        gemm_tflops=732.0,
        datasheet_tflops=989.0,
    )
    out = efficiency_metrics(f)
    assert out["achieved_tflops"] == pytest.approx(2150 * 166.586e9 / 1e12)
    assert out["mfu"] == pytest.approx(2150 * 166.586e9 / 732e12)
    assert out["mfu_datasheet"] == pytest.approx(2150 * 166.586e9 / 989e12)
    assert out["gpu_j_per_analysis"] == pytest.approx(680 * 6 / 129)
    assert out["analyses_per_kj"] == pytest.approx(1000 * 129 / (680 * 6))
    assert out["nn_batch_fill"] == pytest.approx(89 / 128)
    assert out["nn_evals_per_analysis"] == pytest.approx(100.0)
    verdict = bottleneck(f)
    assert verdict.kind == "gpu" and "GPU busy 96%" in verdict.reason and "nnMaxBatchSize" in verdict.knob


def test_a_busy_gpu_far_below_its_matrix_rate_is_kernel_bound() -> None:
    """The KaTrain transformer on the H100 (docs/gpu-h100.md): 69.8 analyses/s, 6,507 NN evals/s of 9.5625 GFLOP
    against a measured 739 TFLOP/s is MFU 0.08 with the GPU 89% busy: busy, but not with matrix arithmetic. The b40
    job above, as busy at MFU 0.49, stays `gpu`; the same figures without a GEMM rate cannot tell, and say gpu."""
    figures = {"req_per_s": 69.8, "analyses_in_windows": 419, "gpu": {"gpu_util_mean": 89.0}, "host": HOST_QUIET,
               "nn_evals_per_s": 6507.0, "flops_per_eval": 9.5625e9}  # fmt: skip
    verdict = bottleneck(JobFigures(**figures, gemm_tflops=739.0))  # type: ignore[arg-type]
    assert verdict.kind == "kernels" and "GPU busy 89%, MFU 0.08" in verdict.reason and "v1.18" in verdict.knob
    assert 6507 * 9.5625e9 / 739e12 < KERNELS_MFU < 2150 * 166.586e9 / 732e12
    assert bottleneck(JobFigures(**figures)).kind == "gpu"  # type: ignore[arg-type]


def test_an_engine_that_answered_everything_counts_its_own_rows() -> None:
    f = JobFigures(req_per_s=10.0, analyses_in_windows=50, gpu={}, host={}, nn_rows=12000.0, answered_total=120)
    out = efficiency_metrics(f)
    assert out["nn_evals_per_s"] == pytest.approx(1000.0) and out["nn_evals_per_analysis"] == pytest.approx(100.0)
    assert "mfu" not in out and "gpu_j_per_analysis" not in out  # absent, never zero


@pytest.mark.parametrize(
    ("gpu", "host", "workers", "kind"),
    [
        ({"gpu_util_mean": 40.0}, {"host_cpu_busy_pct": 95.0, "host_cores": 2.0, "frontend_cpu_cores": 0.1}, 1, "host"),
        (
            {"gpu_util_mean": 40.0},
            {"host_cpu_busy_pct": 30.0, "host_cores": 16.0, "frontend_cpu_cores": 0.97},
            1,
            "frontend",
        ),
        (
            {"gpu_util_mean": 40.0},
            {"host_cpu_busy_pct": 30.0, "host_cores": 16.0, "frontend_cpu_cores": 0.97},
            2,
            "batching",
        ),
        ({}, {"host_cpu_busy_pct": 30.0, "host_cores": 16.0, "frontend_cpu_cores": 0.1}, 1, "batching"),
    ],
)
def test_the_bottleneck_word(gpu: dict[str, float], host: dict[str, float], workers: int, kind: str) -> None:
    verdict = bottleneck(JobFigures(1.0, 1, gpu, host, frontend_workers=workers))
    assert verdict.kind == kind
    if not gpu:
        assert "no GPU figures" in verdict.reason


def test_figures_over_several_windows_sum_energy_and_weight_the_rest() -> None:
    windows = {
        (0.0, 2.0): {"gpu_energy_j": 100.0, "gpu_util_mean": 90.0},
        (5.0, 11.0): {"gpu_energy_j": 600.0, "gpu_util_mean": 50.0},
    }
    out = over_spans(lambda a, b: windows[(a, b)], list(windows))
    assert out["gpu_energy_j"] == 700.0 and out["gpu_util_mean"] == pytest.approx((2 * 90 + 6 * 50) / 8)
