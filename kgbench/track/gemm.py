"""The GPU's measured dense FP16 matrix-product rate: the denominator of a run's MFU.

Datasheet peaks are leads, not ceilings (an H100 SXM is sold as ~989 TFLOP/s dense FP16; this workplace has measured
~800 on one): MFU is stated against what the same device did in a plain matrix product, measured here with torch
(present on the GPU nodes' images; absent: no figure, and the reason says so). Shapes: a large square product (the
ceiling) and the product one 3x3 convolution of a nested-bottleneck block is, as cuDNN runs it (implicit GEMM:
batch x 361 rows, 9 x mid channels deep, mid channels wide).

`python -m kgbench.track.gemm [--json]` prints the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

__all__ = ["DATASHEET_FP16_TFLOPS", "GemmRate", "datasheet_fp16_tflops", "device_gemm_rate", "measure_gemm"]

# dense FP16 tensor-core peaks, TFLOP/s (no sparsity), by the name NVML reports
DATASHEET_FP16_TFLOPS = {"H100 80GB HBM3": 989.0, "H100 PCIe": 756.0, "H200": 989.0, "A100": 312.0}

SHAPES: dict[str, tuple[int, int, int]] = {
    "square-8192": (8192, 8192, 8192),
    "conv3x3-b40-batch128": (128 * 361, 9 * 384, 384),  # a b40c768nbt inner 3x3 conv at batch 128
}


@dataclass(frozen=True)
class GemmRate:
    device: str | None
    shape: str  # m x k x n
    tflops: float | None  # median over the timed products; None: not measured (see reason)
    spread: float | None  # (max - min) / median over the timed products
    datasheet_tflops: float | None
    reason: str = ""


def datasheet_fp16_tflops(device: str | None) -> float | None:
    if not device:
        return None
    for key, value in DATASHEET_FP16_TFLOPS.items():
        if key in device:
            return value
    return None


def measure_gemm(shape: str = "square-8192", repeats: int = 20, warmup: int = 5) -> GemmRate:
    """Times `repeats` FP16 products of random normal data (never zeros: they run faster) with CUDA events."""
    m, k, n = SHAPES[shape]
    label = f"{m}x{k}x{n}"
    try:
        import torch
    except ImportError:
        return GemmRate(None, label, None, None, None, "torch is not installed: no measured matrix-product rate")
    if not torch.cuda.is_available():
        return GemmRate(None, label, None, None, None, "no CUDA device visible to torch")
    device = torch.cuda.get_device_name(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    for _ in range(warmup):
        torch.matmul(a, b)
    times: list[float] = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.matmul(a, b)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000.0)
    rates = [2.0 * m * k * n / t / 1e12 for t in times]
    median = statistics.median(rates)
    return GemmRate(device, label, median, (max(rates) - min(rates)) / median, datasheet_fp16_tflops(device))


def device_gemm_rate(cache: Path | None, device: str | None, timeout_s: float = 180.0) -> GemmRate:
    """The square FP16 rate of `device` (its NVML name): read from `cache` when it holds that device's figure, else
    measured in a subprocess and written there. Without a GPU or torch: a GemmRate whose reason says why."""
    if device is None:
        return GemmRate(None, "8192x8192x8192", None, None, None, "no GPU (NVML sees none): no matrix-product rate")
    if cache is not None and cache.is_file():
        try:
            known = GemmRate(**json.loads(cache.read_text(encoding="utf-8")))
            if known.device == device and known.tflops is not None:
                return known
        except (ValueError, TypeError):
            pass  # a damaged cache is measured again
    argv = [sys.executable, "-m", "kgbench.track.gemm", "--json", "--shape", "square-8192"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
        rate = GemmRate(**json.loads(done.stdout.strip().splitlines()[-1]))
    except (subprocess.TimeoutExpired, ValueError, TypeError, IndexError) as exc:
        sheet = datasheet_fp16_tflops(device)
        return GemmRate(device, "8192x8192x8192", None, None, sheet, f"measurement failed: {exc}")
    # the subprocess may not see the GPU NVML named (no torch, no CUDA): the figure is still this device's
    rate = replace(rate, device=device, datasheet_tflops=rate.datasheet_tflops or datasheet_fp16_tflops(device))
    if cache is not None and rate.tflops is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(asdict(rate)), encoding="utf-8")
    return rate


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kgbench.track.gemm", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--shape", choices=sorted(SHAPES), help="one shape (default: all)")
    args = parser.parse_args(argv)
    results = [measure_gemm(shape) for shape in ([args.shape] if args.shape else SHAPES)]
    for rate in results:
        if args.json:
            print(json.dumps(asdict(rate)))
        elif rate.tflops is None:
            print(f"{rate.shape}: not measured ({rate.reason})")
        else:
            print(
                f"{rate.device} {rate.shape} FP16: {rate.tflops:.0f} TFLOP/s measured (spread {rate.spread:.1%}), "
                f"datasheet {rate.datasheet_tflops or '?'}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
