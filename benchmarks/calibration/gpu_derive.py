"""Another card's profile derived from a measured one: what the H100's fit says about an H200 (``derive``: the same
convnet), and what a transformer's fit says about another transformer (``derive_transformer``, below).

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
from kgbench.nets.description import NetDescription
from kgserve.sim.model.profiles import DeviceProfile

__all__ = [
    "H100",
    "H200",
    "Card",
    "Derivation",
    "NetCost",
    "TransformerDerivation",
    "derive",
    "derive_transformer",
    "net_cost",
    "trunk_row_s",
]

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


@dataclass(frozen=True)
class NetCost:
    """What a transformer's device time and memory scale with, read off a net (kgbench.nets.NetDescription)."""

    gflop: float  # per 19x19 evaluation
    kernels: int  # weighted layers and attention products: roughly the kernels a batch launches
    params: int
    row_elements: int  # a row's widest buffers: attention scores (heads x points^2) + the widest channels x points


def net_cost(net: NetDescription) -> NetCost:
    ffn = [layer.params // net.mid_channels for layer in net.layers if layer.part == "ffn" and layer.kind == "matmul"]
    widest = max([net.trunk_channels, net.mid_channels, *ffn])
    heads = max((layer.heads for layer in net.layers), default=0)
    return NetCost(
        gflop=net.flops() / 1e9,
        kernels=sum(1 for layer in net.layers if layer.macs_per_point or layer.attention_dims),
        params=net.params,
        row_elements=heads * POINTS * POINTS + widest * POINTS,
    )


@dataclass(frozen=True)
class TransformerDerivation:
    profile: DeviceProfile  # the central estimate
    evals_per_s: float  # 1/d1 of the central estimate: the device's rate at large batches
    evals_per_s_high: float  # at the convnet's achieved FLOP rate per row (the b40c768nbt's d1 per GFLOP)
    bandwidth_high: float  # x the target's rate if the device time were all bandwidth-bound


def derive_transformer(
    measured: DeviceProfile,
    source: NetCost,
    target_net: NetCost,
    convnet: DeviceProfile,
    source_card: Card,
    target_card: Card,
    *,
    name: str,
    host_cores: int,
) -> TransformerDerivation:
    """Another transformer on another card from a transformer's fit (the KaTrain net's on the H100):

    * per row, the device time scales with the FLOPs (d1 x target/source GFLOP): the same kinds of layer at the
      achieved rate the fit found (the source ran at MFU ~0.09, kernel-bound, so larger matrices may do better: the
      high estimate is the convnet fit's achieved rate per GFLOP);
    * per batch, d0 scales with the kernels a batch launches (its weighted layers and attention products);
    * memory: the weights with the parameters, the per-row and per-row^2 buffers with a row's widest buffers
      (attention scores heads x points^2 plus the widest channels x points);
    * the card: the H200 has the H100's SMs and clocks, and a kernel-bound device gains nothing from its bandwidth:
      the central estimate keeps the source card's device times (up to target/source copy bandwidth if all of it
      were bandwidth-bound); host terms, waits and the search's constants are the software's and stay.
    """
    flops = target_net.gflop / source.gflop
    rows = target_net.row_elements / source.row_elements
    profile = replace(
        measured,
        name=name,
        device_name=target_card.device_name,
        host_cores=host_cores,
        d0=measured.d0 * target_net.kernels / source.kernels,
        d1=measured.d1 * flops,
        weights_gb=measured.weights_gb * target_net.params / source.params,
        row_gb=measured.row_gb * rows,
        row2_gb=measured.row2_gb * rows,
        memory_gb=target_card.memory_gb,
        peak_tflops=target_card.peak_tflops,
        net_gflop=round(target_net.gflop, 3),
    )
    high = convnet.net_gflop / convnet.d1 / target_net.gflop  # evals/s at the convnet's GFLOP per second per row
    return TransformerDerivation(profile, 1.0 / profile.d1, high, target_card.copy_tbs / source_card.copy_tbs)
