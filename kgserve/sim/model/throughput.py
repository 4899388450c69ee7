"""Throughput model of the simulated engine; its constants come from a device profile (`profiles.py`).

KGSERVE_SIM_PROFILE picks the profile: `h200-b11c768` (default, kind gpu: the pinned transformer on an H200, derived
from the KaTrain net's H100 fit; without the knob a synthetic net of a layout another profile stands for gets that
one), `h100-b10c384h6nbttflrs` (the KaTrain net, fitted to a real H100 run), `h200-b40c768` and `h100-b40c768nbt`
(the b40c768nbt convnet: derived, and fitted to real H100 runs), `h200-b28c512nbt` (derived, checked against the
public H200 record) or `cpu-eigen-b6c96` (kind cpu: KataGo's Eigen
backend with the 6-block test network on 2 cores, calibrated on a real KataGo; its steady state is
`throughput_cpu.py`). docs/throughput-model.md has the measurements and the fits.

GPU steady state for `active` searches, each with T = numSearchThreadsPerAnalysisThread threads (sim seconds):

* threads in flight N = active x T; S = numNNServerThreadsPerModel server threads, each forming batches of
  b = min(nnMaxBatchSize, arrivals per cycle) (fixed point: a search thread waits one batch cycle, then does
  its own tree work before it can ask for the next evaluation; `wait_cycles` says how many cycles that wait is
  on average, queueing behind a batch in progress included);
* one batch costs host time h(b) = h0 + h1*b on its server thread and device time
  d(b) = d0 + d1*b**e + d2*nnMaxBatchSize (e = the profile's batch_exponent, 1 for the GPU profiles: the device's
  rate tends to 1/d1, under its roofline; d2 = 0 for the CUDA backend, which picks its algorithms per batch size);
  the device is serialised, so a server-thread cycle is max(h + d, S*d);
* CPU: every visit costs c_visit of tree work, more when the host is oversubscribed (threads > cores), and the
  whole demand (search threads + busy server threads) is capped at host_cores;
* T > 1 wastes evaluations (virtual-loss collisions, overshoot): evals per visit = 1 + waste*(T-1);
* NN cache: 2^nnCacheSizePowerOfTwo entries; a share `search_hit` of a search's evaluations hit when the table
  holds the working set of all active searches; a larger table costs host time (cache misses on the table itself);
  repeated positions (seen recently, LRU) skip most of their evaluations in the timed simulation;
* each query also has a fixed overhead q0 (setup, root evaluation latency, JSON).

* device memory: base_gb + S x (weights_gb + B x row_gb + B^2 x row2_gb), B = nnMaxBatchSize (the B^2 term: a
  transformer's CUDA graphs, one per batch size up to B), must fit memory_gb (an H200's
  140 GiB) together with every other live sim process on the same device (`devmem.py`), else start-up fails with a
  CUDA-style out-of-memory error (exit 1) and `predict_throughput` returns 0.

`predict_throughput(cfg, visits, concurrency)` is the closed-loop steady state in queries per second; the timed
simulation (`analysis.py`) advances each active search at `steady_state(...).visits_per_search` and reserves
device time on a device shared by all sims with the same KGSERVE_SIM_DEVICE (`SharedDevice`), so several
processes on one simulated GPU slow each other down once their summed busy fraction passes 100%. It stays within
about 15% of `predict_throughput` (tests/kgserve/sim/test_throughput.py).

Environment knobs: KGSERVE_SIM_SPEED (simulated seconds per wall second), KGSERVE_SIM_SEED (numbers),
KGSERVE_SIM_DEVICE (shared device name, "private" = unshared), KGSERVE_SIM_FIXED_RPS (skip this model: a fixed
capacity in queries per simulated second, i.e. x KGSERVE_SIM_SPEED per wall second, shared by the active searches;
0 = answer at once), KGSERVE_SIM_STARTUP_S (start-up time,
a little longer for large NN caches), KGSERVE_SIM_PROFILE (above).

GPU calibration (the H100 runs of 2026-11-25, docs/throughput-model.md): `katago benchmark` with 2 server threads
reaches ~710 NN evals/s at 32 threads and ~2,020 at 512 (measured 636-676 and 1,915); a batch costs the device ~9 ms
plus ~0.38 ms a row, so the rate tends to ~2,660/s (0.45 of the FP16 roofline); 1 and 2 server threads come out
alike, 4 lose (smaller batches); 100-visit loads of 256 threads in flight run at ~20 req/s with the device busy
(measured 18.5-21.5). The H200 profile is x1.05 faster at large batches (its bandwidth). Below 32 threads in flight
nothing was measured.
"""

from __future__ import annotations

import fcntl
import math
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kgserve.sim.model.profiles import DEFAULT_PROFILE, DeviceProfile, get_profile
from kgserve.sim.model.steady import Steady
from kgserve.sim.model.throughput_cpu import cpu_steady_state

__all__ = [
    "BenchmarkFigures",
    "SharedDevice",
    "SimParams",
    "Steady",
    "benchmark_figures",
    "device_memory_gb",
    "predict_throughput",
    "query_overhead_s",
    "steady_state",
]

_RECORD = 32  # bytes of the shared state file: 'busy until' wall time, space padded


@dataclass(frozen=True)
class SimParams:
    analysis_threads: int = 1
    search_threads: int = 1
    max_batch: int = 256
    server_threads: int = 1
    cache_pow: int = 20
    max_visits: int = 1 << 50
    eigen_threads: int = 0  # numEigenThreadsPerModel (cpu profiles); 0: KataGo's default
    profile: str | DeviceProfile = DEFAULT_PROFILE  # a profile's name, or a profile itself (a calibration's trial)

    @property
    def cache_entries(self) -> int:
        """The NN cache's entries: 2^nnCacheSizePowerOfTwo, 0 for KataGo's -1 (no table)."""
        return 0 if self.cache_pow < 0 else 1 << self.cache_pow

    @property
    def device(self) -> DeviceProfile:
        return self.profile if isinstance(self.profile, DeviceProfile) else get_profile(self.profile)

    @classmethod
    def from_cfg(cls, cfg: Mapping[str, str | int], profile: str | DeviceProfile = DEFAULT_PROFILE) -> SimParams:
        def get(key: str, default: int) -> int:
            value = cfg.get(key, default)
            return int(value)

        threads = get("numSearchThreadsPerAnalysisThread", get("numSearchThreads", 1))
        return cls(
            analysis_threads=max(1, get("numAnalysisThreads", 1)),
            search_threads=max(1, threads),
            max_batch=max(1, get("nnMaxBatchSize", 256)),
            server_threads=max(1, get("numNNServerThreadsPerModel", 1)),
            cache_pow=get("nnCacheSizePowerOfTwo", 20),
            max_visits=get("maxVisits", 1 << 50),
            eigen_threads=max(0, get("numEigenThreadsPerModel", 0)),
            profile=profile if isinstance(profile, DeviceProfile) else get_profile(profile).name,
        )


def device_memory_gb(p: SimParams) -> float:
    dev = p.device
    per_server = dev.weights_gb + p.max_batch * dev.row_gb + p.max_batch**2 * dev.row2_gb
    return dev.base_gb + p.server_threads * per_server


def _device_time(dev: DeviceProfile, b: float, max_batch: int) -> float:
    return dev.d0 + dev.d1 * b**dev.batch_exponent + dev.d2 * max_batch


def query_overhead_s(p: SimParams) -> float:
    """Wall seconds a query adds besides its visits (set-up, root evaluation latency, JSON). A cpu profile
    counts its per-query cost as CPU time inside the steady state instead (it competes for the same cores)."""
    return p.device.q0 if p.device.kind == "gpu" else 0.0


def steady_state(p: SimParams, active: int, visits_hint: int = 500) -> Steady:
    if active <= 0:
        return Steady(0.0, 0.0, 0.0, 0.0)
    if p.device.kind == "cpu":
        return cpu_steady_state(
            p.device,
            active=active,
            search_threads=p.search_threads,
            max_batch=p.max_batch,
            eigen_threads=p.eigen_threads,
            cache_entries=p.cache_entries,
            visits_hint=visits_hint,
        )
    return _gpu_steady_state(p, active, visits_hint)


def _gpu_steady_state(p: SimParams, active: int, visits_hint: int) -> Steady:
    dev = p.device
    t = p.search_threads
    s = p.server_threads
    n = active * t
    threads_total = n + s
    oversub = 1.0 + dev.oversub * max(0.0, math.log2(threads_total / dev.host_cores))
    table_cost = 1.0 + 0.04 * max(0, p.cache_pow - 20)
    working_set = active * min(visits_hint, 20000) * 3
    hit = dev.search_hit * min(1.0, p.cache_entries / max(1, working_set))
    cpu_per_visit = dev.c_visit * oversub * table_cost
    b = min(float(p.max_batch), max(1.0, n / s))
    evals = 0.0
    cycle = host = 0.0
    for _ in range(30):
        d = _device_time(dev, b, p.max_batch)
        host = (dev.h0 + dev.h1 * b) * oversub
        cycle = max(host + d, s * d)
        # a thread: waits about one cycle for its batch, then works on the tree; misses need the NN
        per_thread = 1.0 / (dev.wait_cycles * cycle + cpu_per_visit)
        visits = n * per_thread
        nn_rows = visits * (1.0 - hit)
        server_cap = s * p.max_batch / cycle
        nn_rows = min(nn_rows, server_cap)
        visits = nn_rows / (1.0 - hit)
        cpu_demand = visits * cpu_per_visit + s * host / cycle
        if cpu_demand > dev.host_cores:
            visits *= dev.host_cores / cpu_demand
            nn_rows = visits * (1.0 - hit)
        new_b = min(float(p.max_batch), max(1.0, nn_rows * cycle / s))
        if abs(new_b - b) < 1e-3:
            b = new_b
            evals = nn_rows
            break
        b = 0.5 * (b + new_b)
        evals = nn_rows
    visits_total = evals / (1.0 - hit)
    util = min(1.0, evals / max(b, 1e-9) * _device_time(dev, b, p.max_batch))
    return Steady(evals, visits_total / active / (1.0 + dev.waste * (t - 1)), b, util)


@dataclass(frozen=True)
class BenchmarkFigures:
    """`katago benchmark` at one thread count: one position searched at a time by p.search_threads threads."""

    per_position_s: float  # sim seconds per position searched
    visits_per_s: float
    evals_per_s: float
    batch: float
    device_util: float


def benchmark_figures(p: SimParams, visits: int) -> BenchmarkFigures:
    steady = steady_state(p, 1, visits)
    searching = visits / max(1e-9, steady.visits_per_search)
    per_position = searching + query_overhead_s(p)
    rows = steady.evals_per_s * searching / per_position
    return BenchmarkFigures(per_position, visits / per_position, rows, steady.batch, steady.device_util)


def predict_throughput(
    cfg: Mapping[str, str | int], visits: int, concurrency: int, profile: str | DeviceProfile = DEFAULT_PROFILE
) -> float:
    """Queries per second at steady state: `concurrency` queries of `visits` visits always outstanding."""
    p = SimParams.from_cfg(cfg, profile)
    if concurrency <= 0 or visits <= 0:
        return 0.0
    if device_memory_gb(p) > p.device.memory_gb:
        return 0.0
    active = min(concurrency, p.analysis_threads)
    steady = steady_state(p, active, visits)
    per_query = visits / steady.visits_per_search + query_overhead_s(p)
    if p.device.kind == "gpu":
        per_query += (p.search_threads - 1) * 0.0002
    return active / per_query


class SharedDevice:
    """Device time reservations shared by every sim process using the same device name (fcntl-locked file)."""

    def __init__(self, name: str) -> None:
        self.private = name == "private"
        self.busy_until = 0.0
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        self.path = Path(tempfile.gettempdir()) / f"kgserve-sim-device-{safe}.state"

    def reserve(self, seconds: float, earliest: float | None = None) -> tuple[float, float]:
        """Reserve `seconds` of device time (wall clock) as early as possible, not before `earliest` (default:
        now; a round that began while its process was still busy rendering passes its own start); returns
        (start, end)."""
        now = time.time() if earliest is None else earliest
        if self.private:
            start = max(now, self.busy_until)
            self.busy_until = start + seconds
            return start, self.busy_until
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            start = max(now, self._read(fd))
            end = start + seconds
            os.pwrite(fd, self._record(end), 0)
            return start, end
        finally:
            os.close(fd)

    def _open(self) -> int:
        return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)

    @staticmethod
    def _read(fd: int) -> float:
        raw = os.pread(fd, _RECORD, 0)
        try:
            return float(raw.decode("ascii").strip() or 0.0)
        except (ValueError, UnicodeDecodeError):
            return 0.0

    @staticmethod
    def _record(busy_until: float) -> bytes:
        return f"{busy_until:.6f}".ljust(_RECORD - 1).encode("ascii") + b"\n"

    def release(self, reserved_end: float, new_end: float) -> None:
        """Give back the unused tail of our reservation when nobody reserved after it."""
        if self.private:
            if abs(self.busy_until - reserved_end) < 1e-6:
                self.busy_until = new_end
            return
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if abs(self._read(fd) - reserved_end) < 1e-5:
                os.pwrite(fd, self._record(new_end), 0)
        finally:
            os.close(fd)
