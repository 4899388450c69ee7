"""Another card's profile derived from a measured one: what the H100's fit says about an H200.

The H200 has the H100's compute (132 SMs, the same clocks, 989 TFLOP/s dense FP16; this workplace measured the same
bf16 8192^3 GEMM rate on both, 788-798 TFLOP/s) and faster, larger memory (HBM3e, 4.8 TB/s and 141 GB against
HBM3, 3.35 TB/s and 80 GB; device-to-device copies measured here: ~4.3 TB/s against ~3.0). So only the
memory-bound part of a batch's device time changes. The method (docs/throughput-model.md):

* per row, each nested-bottleneck block of the trunk costs, layer by layer, max(FLOPs / the measured conv-shaped
  GEMM rate, bytes moved / the measured copy bandwidth) for its six convolutions (the residual add is
  fused into a convolution as an accumulate: one more read), plus the bytes of the separate batch-norm +
  activation pass before each convolution (KataGo's CUDA backend runs them as their own kernels) over the
  bandwidth: ``trunk_row_s``;
* the fitted per-row time ``d1`` minus the trunk's is the rest (heads, input, gaps between kernels): the central
  estimate keeps it, the high one lets it speed up with the bandwidth too, the low one keeps everything
  (elementwise traffic that stays in L2 gains nothing);
* per batch, the weights are read once (2 bytes a parameter): ``d0`` loses the difference of that read;
* host terms, waits and memory terms are the software's and stay; the memory size is the card's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kgbench.nets.architectures import Architecture
from kgserve.sim.model.profiles import DeviceProfile

__all__ = ["H100", "H200", "Card", "Derivation", "derive", "trunk_row_s"]

POINTS = 19 * 19
FP16_BYTES = 2


@dataclass(frozen=True)
class Card:
    name: str
    device_name: str
    copy_tbs: float  # device-to-device copy bandwidth measured in this workplace
    memory_gb: float  # what the sim allows (GiB as nvidia-smi reports the card)
    peak_tflops: float  # dense FP16 tensor rate, datasheet


H100 = Card("h100", "NVIDIA H100 80GB HBM3 (simulated)", 3.0, 79.2, 989.0)
H200 = Card("h200", "NVIDIA H200 (simulated)", 4.3, 140.4, 989.0)


def trunk_row_s(arch: Architecture, conv_tflops: float, copy_tbs: float) -> float:
    """Device seconds per row of the trunk's convolutions and batch-norm passes, layer by layer roofline."""
    t, m = arch.trunk, arch.mid
    plane = POINTS * FP16_BYTES  # bytes of one channel over the board
    # (FLOPs per point, channel planes read + written) of each convolution of one block
    convs = [
        (2 * t * m, t + m),  # 1x1 trunk -> mid
        *[(2 * 9 * m * m, m + m), (2 * 9 * m * m, m + m + m)] * 2,  # two inner blocks; the second conv accumulates
        (2 * m * t, m + t + t),  # 1x1 mid -> trunk, accumulating into the trunk
    ]
    norm_planes = 2 * t + 2 * m * 5  # read + write the input of each of the six convolutions
    per_block = sum(max(f * POINTS / (conv_tflops * 1e12), p * plane / (copy_tbs * 1e12)) for f, p in convs)
    per_block += norm_planes * plane / (copy_tbs * 1e12)
    return arch.num_blocks * per_block


@dataclass(frozen=True)
class Derivation:
    profile: DeviceProfile  # the central estimate
    trunk_source_s: float  # per row, on the measured card
    trunk_target_s: float
    rest_s: float  # d1 minus the trunk: heads, input, gaps
    speedup_low: float  # target rate / source rate at large batches
    speedup: float
    speedup_high: float


def derive(
    measured: DeviceProfile,
    arch: Architecture,
    params: int,
    conv_tflops: float,
    source: Card,
    target: Card,
    *,
    name: str,
    host_cores: int,
) -> Derivation:
    if measured.batch_exponent != 1.0:
        raise ValueError("the derivation splits a linear per-row time d1: batch_exponent must be 1")
    ratio = source.copy_tbs / target.copy_tbs  # time of a bandwidth-bound byte on the target / on the source
    trunk_source = trunk_row_s(arch, conv_tflops, source.copy_tbs)
    trunk_target = trunk_row_s(arch, conv_tflops, target.copy_tbs)
    rest = max(0.0, measured.d1 - trunk_source)
    d1 = trunk_target + rest
    d1_fast = trunk_target + rest * ratio
    weights_read = params * FP16_BYTES / (source.copy_tbs * 1e12)
    profile = replace(
        measured,
        name=name,
        device_name=target.device_name,
        host_cores=host_cores,
        d0=measured.d0 - weights_read * (1.0 - ratio),
        d1=d1,
        memory_gb=target.memory_gb,
        peak_tflops=target.peak_tflops,
    )
    return Derivation(profile, trunk_source, trunk_target, rest, 1.0, measured.d1 / d1, measured.d1 / d1_fast)
