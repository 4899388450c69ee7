"""Device profiles of the simulated engine: which machine and network the throughput model stands for.

Chosen by the environment knob ``KGSERVE_SIM_PROFILE`` (default ``h200-b40c768``); ``kgserve.sim.throughput``
reads every constant from the profile.

``h100-b40c768nbt`` (kind ``gpu``): an NVIDIA H100 80GB HBM3 running KataGo v1.17.2's CUDA backend (FP16, NHWC)
with a b40c768nbt network (the pinned architecture; a synthetic net of identical cost) from a 16-core host.
**Fitted** to what a lent H100 measured on 2026-11-25 (docs/data/gpu-h100-2026-11-25/run1/: ``katago benchmark``
over 32-512 search threads with 1, 2 and 4 server threads; two closed-loop 100-visit loads on the analysis engine)
by ``python -m kgbench.bench.calibration_gpu`` (table, fit quality and method in docs/throughput-model.md). What
the fit found: a batch's device time is ~6 ms plus ~0.42 ms a row (a rate that tends to ~2,360 NN evals/s, 0.40
of the device's FP16 roofline); a search thread waits ~1.8 server cycles per evaluation; one server thread leaves
the device idle ~15 ms a batch; the host's tree work, the NN cache inside a search (KataGo's graph search shares
transpositions: the benchmark's rows equal its visits) and oversubscribing 16 cores with 512 threads cost nothing
measurable. Device memory from NVML's peaks: ~1 GiB, plus ~0.71 GiB and 3 MiB per row of nnMaxBatchSize for each
server thread.

``h200-b40c768`` (kind ``gpu``): an H200 running a b40c768 network from a 32-core host. No H200 was available
to measure, so its constants are set from public figures (shape, not targets; more in
tests/data/katago-reference/performance-facts.md):

* RTX 4090, TensorRT, b28 network, ``katago benchmark``: 575 visits/s at 5 search threads (avg batch 2.5),
  1,435 at 16, 2,347 at 40 (avg batch 19): throughput keeps rising with threads in flight, sub-linearly
  (KataGo issue #1041, 2025-07-11).
* RTX 4060 Ti, b40 network, ``katago benchmark``: CUDA 254 visits/s (20 threads), TensorRT 1,957 (32 threads):
  the backend matters as much as the card (KataGo issue #852, 2023-10-31).
* 8 x A100 (AWS), the b40-era strongest network: "maybe like 35k per second was common" for the whole machine,
  ~4.4k visits/s per A100, varying with transpositions (KataGo issue #452, lightvector, 2021-03-23).
* H100 / H200, one process: ``benchmark`` recommended 320 threads while GPU utilisation stayed <= 10%
  (KataGo issue #982): one process leaves a big GPU mostly idle.
* ``numNNServerThreadsPerModel = 2`` on one GPU: up to 1.57x (KataGo PR #1239, v1.18 CUDA optimisations).
* RTX PRO 6000 (Blackwell), b11c768 transformer: CUDA 2,814 visits/s at 64 threads (KataGo PR #1218).
  No figure for an RTX 6000 Ada with a b28/b40 network was found in the sources searched.

Re-calibrating it from a real GPU: docs/throughput-model.md ("Re-calibrating the GPU profile").

``cpu-eigen-b6c96`` (kind ``cpu``): KataGo's Eigen (CPU) backend running the 6-block test network
(g170-b6c96) on a 2-core x86-64 host (AVX2). Measured with ``python -m kgbench.bench.calibration``
(table in docs/throughput-model.md). On the Eigen backend the neural net runs on the same cores as the search:
there is no device to overlap with, ``numNNServerThreadsPerModel`` is ignored (KataGo runs
``numEigenThreadsPerModel`` NN threads, default min(search threads in flight, cores)), and every query costs
CPU time: tree work per visit, NN rows (a per-batch overhead amortised over the batch), wasted evaluations of
extra search threads, a per-query overhead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["DEFAULT_PROFILE", "PROFILES", "DeviceProfile", "get_profile"]


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
    batch_exponent: float = 0.85  # e: below 1 the device's rate grows without bound with the batch
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
    base_gb: float = 0.0
    # roofline: the device's peak dense rate in the precision its backend computes in (gpu: FP16 tensor cores, the
    # datasheet's dense figure; cpu: FP32 FMA of host_cores, Eigen computes in FP32), and the net's cost per
    # 19x19 evaluation (`python -m kgbench.nets flops MODEL`); no steady state may beat their ratio
    peak_tflops: float = 0.0
    net_gflop: float = 0.0

    @property
    def roofline_evals_per_s(self) -> float:
        """NN evaluations per second the device could do at its peak rate: an upper bound, never reached."""
        return self.peak_tflops * 1e12 / (self.net_gflop * 1e9)


H200_B40C768 = DeviceProfile(
    name="h200-b40c768",
    kind="gpu",
    device_name="NVIDIA H200 (simulated)",
    host_cores=32,
    h0=0.0020,
    h1=0.00009,
    d0=0.0015,
    d1=0.00018,
    d2=0.000012,
    c_visit=0.0009,
    waste=0.06,
    q0=0.004,
    memory_gb=141.0,
    weights_gb=0.6,
    row_gb=0.09,
    base_gb=1.0,
    # NVIDIA H200 SXM datasheet: FP16 tensor 1,979 TFLOP/s with 2:4 sparsity, 989 dense; b40c768nbt: 166.6 GFLOP
    # (a synthetic b40c768nbt, docs/data/gpu-h100-2026-11-25/run1/nets.jsonl)
    peak_tflops=989.0,
    net_gflop=166.586,
)

H100_B40C768NBT = DeviceProfile(
    name="h100-b40c768nbt",
    kind="gpu",
    device_name="NVIDIA H100 80GB HBM3 (simulated)",
    host_cores=16,
    # fitted 2026-11-25 to docs/data/gpu-h100-2026-11-25/run1/results.jsonl (net b40), d2 held at 0 (the CUDA
    # backend picks its convolution algorithms per batch size; the data do not resolve a cost of nnMaxBatchSize):
    #   python -m kgbench.bench.calibration_gpu --data docs/data/gpu-h100-2026-11-25/run1/results.jsonl --net b40 \
    #     --fixed d2=0
    h0=0.0151,
    d0=0.0062,
    d1=0.000423,
    batch_exponent=1.0,
    wait_cycles=1.83,
    waste=0.000414,
    oversub=0.0,
    search_hit=0.0,
    q0=0.02,
    # NVML peaks: 2,531 MiB (1 server thread, nnMaxBatchSize 256), 4,045 (2, 256), 5,617 (2, 512), 7,079 (4, 256);
    # the card: 85,017,493,504 bytes (KataGo's log), 79.2 GiB
    memory_gb=79.2,
    weights_gb=0.714,
    row_gb=0.003,
    base_gb=0.99,
    # NVIDIA H100 SXM5 datasheet: FP16 tensor 989 TFLOP/s dense (measured here: 732 for 8192^3, 529 for the
    # conv-shaped 46208x3456x384); b40c768nbt: 166.6 GFLOP per evaluation (run1/nets.jsonl)
    peak_tflops=989.0,
    net_gflop=166.586,
)

CPU_EIGEN_B6C96 = DeviceProfile(
    name="cpu-eigen-b6c96",
    kind="cpu",
    device_name="CPU (Eigen backend, simulated)",
    host_cores=2,
    # fitted (least squares on log error) to the real engine's CPU seconds per query over the 16-cfg grid of
    # kgbench.bench.calibration, 4 repetitions, 2026-11-22 (docs/throughput-model.md); q0 from 8/32/128-visit runs
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
    # generous reading (at the base clock: 157). g170-b6c96: 0.724 GFLOP (python -m kgbench.nets flops)
    peak_tflops=0.224,
    net_gflop=0.724,
)

PROFILES: dict[str, DeviceProfile] = {p.name: p for p in (H200_B40C768, H100_B40C768NBT, CPU_EIGEN_B6C96)}
DEFAULT_PROFILE = H200_B40C768.name


def get_profile(name: str) -> DeviceProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown sim profile {name!r}; known: {', '.join(sorted(PROFILES))}") from None
