"""Device profiles of the simulated engine: which machine and network the throughput model stands for.

Chosen by the environment knob ``KGSERVE_SIM_PROFILE`` (default ``h200-b11c768``, the pinned network's layout on
an H200); ``kgserve.sim.model.throughput`` reads every constant from the profile. Every GPU profile stands for KataGo
v1.17.2's CUDA backend, the build measured here: v1.18's faster transformer kernels are in none of them.

``h200-b11c768`` (kind ``gpu``, the default): the pinned network (b11c768h12nbt3tflrs-fson-silu, a transformer of
57.3 GFLOP per evaluation) on an H200 from a 32-core host. **Derived** from the KaTrain fit below
(``benchmarks.calibration.gpu_derive.derive_transformer``): per row the device time of the KaTrain net scaled by the
FLOPs (x5.99), per batch by the kernels launched (x1.57), memory by the weights and the widest per-row buffers
(x2.05); ~1,640 NN evals/s at large batches, 0.09 of the roofline (the KaTrain net's efficiency; at the convnet's
it would be ~7,730). Wide uncertainty: neither this net nor an H200 has been measured.

``h100-b10c384h6nbttflrs`` (kind ``gpu``): the KaTrain net (b10c384h6nbttflrs, a transformer of 9.56 GFLOP) on the
H100 of 2026-11-25. **Fitted** to its measurements there (run 1's 1-visit load, the KaTrain qualification's
benchmark, sweeps and pipe loads, its jobs' memory peaks); docs/throughput-model.md has the table and the fit's
quality. Device ~3.2 ms a batch plus ~0.10 ms a row (~9,800 NN evals/s at most, 0.09 of the roofline), memory
growing with the square of nnMaxBatchSize (2 server threads at 256 do not fit the H100, as measured).

``h100-b40c768nbt`` (kind ``gpu``): an NVIDIA H100 80GB HBM3 running KataGo v1.17.2's CUDA backend (FP16, NHWC)
with a b40c768nbt network (the pinned architecture; a synthetic net of identical cost) from a 16-core host.
**Fitted** to what a lent H100 measured on 2026-11-25 (docs/data/gpu-h100-2026-11-25/: run 1's ``katago
benchmark`` over 32-512 search threads with 1, 2 and 4 server threads and its closed-loop 100-visit loads on the
analysis engine; the qualification's benchmark, its sweep through kgserve over nnMaxBatchSize and server threads, and
its loads through kgserve and the engine's pipe) by ``python -m benchmarks.calibration.gpu`` (table, fit quality,
a held-out check and the method in docs/throughput-model.md). What the fit found: a batch's device time is ~9 ms plus
~0.38 ms a row (a rate that tends to ~2,660 NN evals/s, 0.45 of the device's FP16 roofline); a search thread waits
~1.7 server cycles per evaluation; one server thread leaves the device idle ~5 ms a batch; the host's tree work, the
NN cache inside a search (KataGo's graph search shares transpositions: the benchmark's rows equal its visits),
nnMaxBatchSize beyond what the threads fill and oversubscribing 16 cores with 512 threads cost nothing measurable.
Device memory from NVML's peaks: ~1 GiB, plus ~0.71 GiB and 3 MiB per row of nnMaxBatchSize for each server
thread.

``h200-b40c768`` (kind ``gpu``; the default until the pin moved to the transformer): the same network on an NVIDIA
H200 from a 32-core host. **Derived**
from the H100 fit (``--derive h200``, ``benchmarks.calibration.gpu_derive``): the H200 has the H100's compute
(132 SMs, 989 TFLOP/s dense FP16; the same bf16 GEMM rate measured on both here) and faster memory (4.8 against
3.35 TB/s; copies measured here 4.3 against 3.0 TB/s), so only the bandwidth-bound part of a batch's device time
shrinks: x1.05 the H100's rate at large batches (range x1.00-x1.05), ~2,790 NN evals/s at most. No H200 has
measured it yet. The profile it replaces (set from the public figures in
tests/data/katago-reference/performance-facts.md) reached 8,565 NN evals/s: more than the card's FP16 roofline
(5,937/s) allows.

``h200-b28c512nbt`` (kind ``gpu``): the b28c512nbt convnet (52.2 GFLOP) on the H200, the net of the one public H200
record (the mission's node's ``katago benchmark`` grid, docs/data/issue42/). **Derived** from ``h200-b40c768`` by the
nets' FLOPs (per row) and kernels (per batch), then **checked** against that record: its 5 CUDA points within 10%,
Spearman 1.0 (``python -m benchmarks.calibration.public_h200``; docs/throughput-model.md).

``cpu-eigen-b6c96`` (kind ``cpu``): KataGo's Eigen (CPU) backend running the 6-block test network
(g170-b6c96) on a 2-core x86-64 host (AVX2). Measured with ``python -m benchmarks.calibration``
(table in docs/throughput-model.md). On the Eigen backend the neural net runs on the same cores as the search:
there is no device to overlap with, ``numNNServerThreadsPerModel`` is ignored (KataGo runs
``numEigenThreadsPerModel`` NN threads, default min(search threads in flight, cores)), and every query costs
CPU time: tree work per visit, NN rows (a per-batch overhead amortised over the batch), wasted evaluations of
extra search threads, a per-query overhead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

__all__ = ["DEFAULT_PROFILE", "PROFILES", "DeviceProfile", "get_profile", "profile_for_model"]


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    kind: Literal["gpu", "cpu"]
    device_name: str  # in the sim's start-up log and out-of-memory message
    host_cores: int
    # gpu: seconds per batch on the serving thread (h = h0 + h1*b) and on the device (d0 + d1*b**e + d2*max)
    h0: float = 0.0
    h1: float = 0.0
    d0: float = 0.0
    d1: float = 0.0
    d2: float = 0.0
    batch_exponent: float = 1.0  # e: below 1 the device's rate would grow without bound with the batch
    wait_cycles: float = 1.0  # gpu: server cycles a search thread waits for one evaluation (queueing included)
    # cpu: NN CPU seconds per batch (n0) and per row (n1)
    n0: float = 0.0
    n1: float = 0.0
    c_visit: float = 0.0  # CPU seconds of tree work per visit
    waste: float = 0.0  # extra evaluations per visit for each search thread beyond the first
    oversub: float = 0.5  # cost growth per doubling of threads beyond the cores
    search_hit: float = 0.10  # share of a search's evaluations the NN cache answers (when it holds the working set)
    batch_cap: float = 0.0  # cpu: the most rows an NN thread finds queued (0: only nnMaxBatchSize limits)
    q0: float = 0.0  # seconds per query: wall time (gpu) or CPU time (cpu)
    memory_gb: float = 0.0  # device memory (gpu) or what the sim allows the process (cpu)
    weights_gb: float = 0.0
    row_gb: float = 0.0
    # per server thread and nnMaxBatchSize^2: the CUDA backend warms a transformer's graphs for every batch size up
    # to nnMaxBatchSize, each with its own buffers (0 for the convnets, whose memory grows linearly)
    row2_gb: float = 0.0
    base_gb: float = 0.0
    # roofline: the device's peak dense rate in the precision its backend computes in (gpu: FP16 tensor cores, the
    # datasheet's dense figure; cpu: FP32 FMA of host_cores, Eigen computes in FP32), and the net's cost per 19x19
    # evaluation as the backend computes it (direct convolutions: `python -m kgbench.nets flops MODEL`); no steady
    # state may beat their ratio
    peak_tflops: float = 0.0
    net_gflop: float = 0.0
    # model names (after a synthetic net's `synthetic-`) this profile stands for when the sim is given such a net and
    # KGSERVE_SIM_PROFILE is unset (`profile_for_model`): the mission's card, H200, per network
    nets: tuple[str, ...] = ()

    @property
    def roofline_evals_per_s(self) -> float:
        """NN evaluations per second the device could do at its peak rate: an upper bound, never reached."""
        return self.peak_tflops * 1e12 / (self.net_gflop * 1e9)


H100_B40C768NBT = DeviceProfile(
    name="h100-b40c768nbt",
    kind="gpu",
    device_name="NVIDIA H100 80GB HBM3 (simulated)",
    host_cores=16,
    # fitted to both H100 runs of 2026-11-25 (docs/data/gpu-h100-2026-11-25/: run 1's benchmark and engine-pipe loads,
    # the b40c768nbt qualification's benchmark, sweep through kgserve and pipe loads), d2 held at 0 (the CUDA backend
    # picks its convolution algorithms per batch size; 128 and 256 measured alike):
    #   cd docs/data/gpu-h100-2026-11-25 && python -m benchmarks.calibration.gpu --net b40 --fixed d2=0 \
    #     --data run1/results.jsonl qualify-b40c768nbt/results.json
    h0=0.0048,
    d0=0.00914,
    d1=0.000376,
    batch_exponent=1.0,
    wait_cycles=1.69,
    waste=0.000402,
    oversub=0.0,
    search_hit=0.0,
    q0=0.0289,
    # NVML peaks: 2,531 MiB (1 server thread, nnMaxBatchSize 256), 4,045 (2, 256), 5,617 (2, 512), 7,079 (4, 256),
    # 4,053 (2, 256); the card: 85,017,493,504 bytes (KataGo's log), 79.2 GiB
    memory_gb=79.2,
    weights_gb=0.714,
    row_gb=0.00299,
    base_gb=0.992,
    # NVIDIA H100 SXM5 datasheet: FP16 tensor 989 TFLOP/s dense (measured here: 732 for 8192^3, 529 for the
    # conv-shaped 46208x3456x384); b40c768nbt: 166.6 GFLOP per evaluation (run1/nets.jsonl)
    peak_tflops=989.0,
    net_gflop=166.586,
    nets=("b40c768nbt", "kata1-zhizi-b40c768nbt", "kata1-b40c768nbt"),
)

H200_B40C768 = replace(
    H100_B40C768NBT,
    name="h200-b40c768",
    device_name="NVIDIA H200 (simulated)",
    host_cores=32,  # the target node's; not measured (the H100 run's host never set the pace)
    # derived from H100_B40C768NBT (docs/throughput-model.md, "The H200 profile"):
    #   python -m benchmarks.calibration.gpu (H100_B40C768NBT's command) --derive h200 --derive-name h200-b40c768
    # only the device's batch costs change (its bandwidth); host terms, waits and memory terms are the H100 run's
    d0=0.00909,
    d1=0.000358,
    memory_gb=140.4,  # "141 GB": 143,771 MiB as nvidia-smi reports it
    # NVIDIA H200 SXM datasheet: FP16 tensor 1,979 TFLOP/s with 2:4 sparsity, 989 dense (as the H100)
    peak_tflops=989.0,
    nets=("b40c768nbt", "kata1-zhizi-b40c768nbt", "kata1-b40c768nbt"),
)

# the b28c512nbt convnet on the H200, scaled from H200_B40C768 by the rule derive_transformer applies to any two nets of
# one kind (per row the FLOPs, per batch the kernels, memory the weights and a row's widest buffers) and checked
# against the one public H200 record, the mission's node's `katago benchmark` grid (docs/throughput-model.md, "The
# H200 against its public record": 5 CUDA points within 10%, Spearman 1.0):
#   python -m benchmarks.calibration.public_h200 --derive
H200_B28C512NBT = replace(
    H200_B40C768,
    name="h200-b28c512nbt",
    d0=0.00642,
    d1=0.000112,
    weights_gb=0.224,
    row_gb=0.00199,
    # b28c512nbt: 52.206 GFLOP per evaluation (python -m kgbench.nets flops on its synthetic net)
    net_gflop=52.206,
    nets=("b28c512nbt", "kata1-b28c512nbt"),
)

H100_B10C384H6NBTTFLRS = DeviceProfile(
    name="h100-b10c384h6nbttflrs",
    kind="gpu",
    device_name="NVIDIA H100 80GB HBM3 (simulated)",
    host_cores=16,
    # fitted to the KaTrain net's H100 figures of 2026-11-25 (run 1's 1-visit engine load, its qualification's
    # benchmark, sweeps through kgserve and pipe loads; the memory peaks of its jobs), d2 held at 0:
    #   cd docs/data/gpu-h100-2026-11-25 && python -m benchmarks.calibration.gpu --base h100-b10c384h6nbttflrs \
    #     --net katrain --fixed d2=0 --data run1/results.jsonl qualify-katrain/results.json mlflow-jobs.json
    # (docs/data/issue34/fit-h100-katrain.json). The device tends to ~9,800 NN evals/s, 0.09 of its FP16 roofline:
    # a transformer's many small kernels, not its arithmetic, set the pace on KataGo v1.17.2's CUDA backend
    h0=0.00251,
    h1=5.87e-06,
    d0=0.00324,
    d1=0.000102,
    batch_exponent=1.0,
    wait_cycles=1.74,
    c_visit=0.00036,
    oversub=0.0,
    search_hit=0.0428,
    # NVML peaks (mlflow-jobs.json, run 1): 2,069 MiB (1 server thread, nnMaxBatchSize 32), 8,115 (2, 64), 14,015
    # (1, 128), 27,017 (2, 128), 53,023 (4, 128); (2, 256) ran out of the card's 79.2 GiB (the fit: ~98 GiB). Growth
    # with the square of nnMaxBatchSize: the CUDA backend warms a graph for every batch size up to it
    memory_gb=79.2,
    weights_gb=0.0492,
    row_gb=0.00803,
    row2_gb=0.000709,
    base_gb=0.988,
    # b10c384h6nbttflrs: 9.5625 GFLOP per evaluation (python -m kgbench.nets flops; 2.0 of it attention's products)
    peak_tflops=989.0,
    net_gflop=9.5625,
    nets=("b10c384h6nbttflrs",),
)

H200_B11C768 = replace(
    H100_B10C384H6NBTTFLRS,
    name="h200-b11c768",
    device_name="NVIDIA H200 (simulated)",
    host_cores=32,  # the target node's
    # derived from H100_B10C384H6NBTTFLRS for the pinned network's layout (docs/throughput-model.md, "The transformer
    # profiles"; benchmarks.calibration.gpu_derive.derive_transformer):
    #   python -m benchmarks.calibration.gpu (H100_B10C384H6NBTTFLRS's command) --derive h200 \
    #     --arch b10c384h6nbttflrs --derive-arch b11c768h12nbt3tflrs-fson-silu --derive-name h200-b11c768
    # per row: x5.99 the FLOPs at the KaTrain fit's achieved rate (~1,640 NN evals/s at large batches; at the b40
    # convnet fit's rate per GFLOP it would be ~7,730); per batch: x1.57 the kernels; the H200's bandwidth left out
    # (a kernel-bound device; up to x1.43 if bandwidth-bound). Neither the net nor an H200 has been measured; host
    # terms, waits and the search's constants are the KaTrain fit's
    d0=0.00509,
    d1=0.000611,
    memory_gb=140.4,
    weights_gb=0.329,
    row_gb=0.0164,
    row2_gb=0.00145,
    # b11c768h12nbt3tflrs-fson-silu: 57.286 GFLOP per evaluation (python -m kgbench.nets flops on its synthetic net)
    net_gflop=57.286,
    nets=("b11c768h12nbt3tflrs", "kata1-tf3-b11c768"),
)

CPU_EIGEN_B6C96 = DeviceProfile(
    name="cpu-eigen-b6c96",
    kind="cpu",
    device_name="CPU (Eigen backend, simulated)",
    host_cores=2,
    # fitted (least squares on log error) to the real engine's CPU seconds per query over the 16-cfg grid of
    # benchmarks.calibration, 4 repetitions, 2026-11-22 (docs/throughput-model.md); q0 from 8/32/128-visit runs
    n0=0.0024,
    n1=0.0031,
    c_visit=0.0017,
    waste=0.014,
    oversub=0.02,
    batch_cap=2.0,
    q0=0.005,
    memory_gb=64.0,
    weights_gb=0.02,
    row_gb=0.0005,
    base_gb=0.1,
    # AMD EPYC, family 25 model 1 (Zen 3), 2.45 GHz base: 2 x 256-bit FMA pipes = 32 FP32 FLOP per cycle and core;
    # at the 3.5 GHz most boost of the Zen 3 EPYC with that base clock (7763): 2 x 3.5 x 32 = 224 GFLOP/s, the most
    # generous reading (at the base clock: 157). g170-b6c96: 0.724 GFLOP counted directly (python -m kgbench.nets
    # flops), 0.210 as the Eigen backend computes it: its 3x3 convolutions (940,032 of the 1,002,112 weights) run as
    # Winograd F(4x4,3x3) on 6x6 tiles, 25 tiles x 36 = 900 multiply-adds per channel pair instead of 361 x 9, its
    # 5x5 input convolution as F(2x2,5x5), 100 x 36 instead of 361 x 25 (cpp/neuralnet/eigenbackend.cpp); transforms
    # left out (the bound only gets looser). With the direct count the profile would sit at 99.8% of this peak.
    peak_tflops=0.224,
    net_gflop=0.210,
)

PROFILES: dict[str, DeviceProfile] = {
    p.name: p
    for p in (H200_B11C768, H200_B40C768, H200_B28C512NBT, H100_B40C768NBT, H100_B10C384H6NBTTFLRS, CPU_EIGEN_B6C96)
}
# the pinned network's layout on the mission's card (kgbench.nets.PINNED_ARCHITECTURE; a test holds them together)
DEFAULT_PROFILE = H200_B11C768.name


def get_profile(name: str) -> DeviceProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown sim profile {name!r}; known: {', '.join(sorted(PROFILES))}") from None


def profile_for_model(model_name: str, card: str = "h200") -> str | None:
    """The profile standing for a KataGo network on `card` (the mission's H200 by default) by its model name (a
    synthetic net's without `synthetic-`), or None (the sim's own stand-in net, or a net no profile of that card
    stands for: the default applies)."""
    name = model_name.removeprefix("synthetic-")
    for profile in PROFILES.values():
        if profile.name.startswith(f"{card}-") and any(name.startswith(net) for net in profile.nets):
            return profile.name
    return None
