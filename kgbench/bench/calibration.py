"""The sim's CPU (Eigen) profile held against a real KataGo: same grid, same load, table of req/s.

``python -m kgbench.bench.calibration [--reps 3] [--visits 32] [--save real.json | --load real.json]``

Needs ``KGBENCH_KATAGO_BIN`` (a KataGo built with the Eigen backend) and ``KGBENCH_KATAGO_MODEL`` (the network
the profile models: the b6c96 test network). For every cfg of the grid, the real engine and the simulated one
(``KGSERVE_SIM_PROFILE=cpu-eigen-b6c96``) get the same closed-loop load over their stdin pipe
(``kgbench.bench.engineload``): ``queries`` 19x19 positions of ``visits`` visits, ``numAnalysisThreads`` in flight.

On a machine shared with other work the wall-clock req/s of the real engine says more about the neighbours than
about the cfg (the scheduler shares the cores per runnable thread, so a cfg with more threads also gets more of the
machine). The comparison therefore uses the engine's own CPU time: ``capacity`` = usable cores / CPU seconds per
query, the req/s the cfg reaches with the cores to itself (usable cores = min(cores, search threads): one search
thread and its NN evaluation alternate on one core; KataGo's Eigen backend runs min(search threads, cores) NN
threads, whatever numNNServerThreadsPerModel says). The raw wall req/s and the cores the engine got are printed too.
Each cfg is measured ``reps`` times, interleaved across the grid so that a burst of outside load does not hit one
cfg only; the median CPU seconds per query is used.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from kgbench.bench.common import machine_line
from kgbench.bench.engineload import EngineLoadResult, nineteen_by_nineteen, run_engine_load_sync
from kgserve.sim.throughput import predict_throughput

__all__ = ["GRID", "Point", "Row", "capacity", "main", "resolved_pairs", "spearman"]

PROFILE = "cpu-eigen-b6c96"
SETTING = "real KataGo and the sim over stdin pipes, no HTTP; cores shared with other work"


@dataclass(frozen=True)
class Point:
    analysis_threads: int
    search_threads: int
    max_batch: int
    server_threads: int

    @property
    def label(self) -> str:
        return f"{self.analysis_threads}x{self.search_threads} b{self.max_batch} s{self.server_threads}"

    def cfg(self) -> dict[str, int]:
        return {
            "numAnalysisThreads": self.analysis_threads,
            "numSearchThreadsPerAnalysisThread": self.search_threads,
            "nnMaxBatchSize": self.max_batch,
            "numNNServerThreadsPerModel": self.server_threads,
        }


# (numAnalysisThreads, numSearchThreadsPerAnalysisThread, nnMaxBatchSize, numNNServerThreadsPerModel): one search
# thread (NN and tree work alternating on one core), up to 16 search threads per position (wasted evaluations),
# up to 32 positions at once on 2 cores; batches too small and large enough; server threads 1 and 2 (ignored by
# the Eigen backend, so those pairs must come out alike)
GRID: tuple[Point, ...] = tuple(
    Point(*t)
    for t in (
        (1, 1, 1, 1),
        (1, 1, 8, 2),
        (1, 2, 2, 1),
        (1, 4, 4, 1),
        (1, 8, 8, 1),
        (1, 16, 16, 2),
        (2, 8, 16, 1),
        (2, 4, 8, 2),
        (2, 1, 2, 1),
        (4, 1, 4, 1),
        (4, 2, 8, 1),
        (8, 1, 8, 1),
        (8, 1, 16, 2),
        (16, 1, 16, 1),
        (16, 1, 4, 1),
        (32, 1, 32, 2),
    )
)


@dataclass(frozen=True)
class Row:
    point: Point
    real_wall_rps: float  # median measured req/s (shared machine)
    real_cores: float  # median cores the engine got
    real_cpu_per_query: float  # median CPU seconds per query
    real_capacity: float  # usable cores / CPU seconds per query
    real_low: float  # the lowest and highest capacity over the repetitions
    real_high: float
    sim_rps: float  # the simulated engine process, same load
    real_batch: float  # NN avg batch size from the engines' exit logs (0: not logged)
    sim_batch: float
    model_rps: float  # predict_throughput (the closed-form steady state)

    @property
    def error(self) -> float:
        return self.sim_rps / self.real_capacity - 1.0


def usable_cores(point: Point, cores: int) -> int:
    return max(1, min(cores, point.analysis_threads * point.search_threads))


def capacity(point: Point, cpu_per_query: float, cores: int) -> float:
    return usable_cores(point, cores) / max(cpu_per_query, 1e-9)


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman's rank correlation (average ranks for ties)."""
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError("need two sequences of the same length >= 2")
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    var = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return cov / var if var else 0.0


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def resolved_pairs(rows: Sequence[Row]) -> tuple[int, int]:
    """Pairs of cfgs the measurement tells apart (their ranges over the repetitions do not overlap), and how many
    of them the sim orders as the real engine does. On a flat landscape this says more than a rank correlation
    dominated by ties within the noise."""
    resolved = agree = 0
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            if a.real_low > b.real_high or b.real_low > a.real_high:
                resolved += 1
                agree += (a.real_capacity > b.real_capacity) == (a.sim_rps > b.sim_rps)
    return resolved, agree


def _cfg_file(point: Point, directory: Path) -> Path:
    path = directory / f"{point.label.replace(' ', '_')}.cfg"
    lines = [f"{k} = {v}" for k, v in point.cfg().items()]
    lines += ["logToStderr = true", "nnCacheSizePowerOfTwo = 18", "nnMutexPoolSizePowerOfTwo = 14"]
    path.write_text("\n".join([*lines, "reportAnalysisWinratesAs = BLACK", ""]))
    return path


def _queries(point: Point) -> int:
    return point.analysis_threads + max(12, point.analysis_threads)


def _run(argv: list[str], point: Point, visits: int, seed: int, env: dict[str, str] | None) -> EngineLoadResult:
    return run_engine_load_sync(
        argv,
        nineteen_by_nineteen(seed),
        visits=visits,
        queries=_queries(point),
        concurrency=point.analysis_threads,
        env=env,
        run_timeout_s=300.0,
    )


def measure_real(
    binary: str, model: str, visits: int, reps: int, seed: int, workdir: Path
) -> dict[Point, list[EngineLoadResult]]:
    results: dict[Point, list[EngineLoadResult]] = {p: [] for p in GRID}
    for rep in range(reps):
        for point in GRID:
            argv = [binary, "analysis", "-config", str(_cfg_file(point, workdir)), "-model", model]
            result = _run(argv, point, visits, seed + rep, None)
            results[point].append(result)
            print(
                f"real {point.label:18s} rep {rep + 1}/{reps}: {result.req_per_s:6.2f} req/s wall, "
                f"{result.cores_used:4.2f} cores, {result.cpu_per_query:5.3f} CPU s/query",
                file=sys.stderr,
                flush=True,
            )
    return results


def measure_sim(point: Point, model: str, visits: int, seed: int, speed: float, workdir: Path) -> EngineLoadResult:
    """The simulated engine with the cpu profile under the same load; its req/s are in wall seconds."""
    env = {
        **os.environ,
        "KGSERVE_SIM_PROFILE": PROFILE,
        "KGSERVE_SIM_SPEED": f"{speed:g}",
        "KGSERVE_SIM_DEVICE": "private",
        "KGSERVE_SIM_SEED": str(seed),
        "KGSERVE_SIM_STARTUP_S": "0.05",
    }
    argv = [sys.executable, "-m", "kgserve.sim", "analysis", "-config", str(_cfg_file(point, workdir)), "-model", model]
    return _run(argv, point, visits, seed, env)


def build_rows(
    real: dict[Point, list[EngineLoadResult]],
    model: str,
    visits: int,
    seed: int,
    speed: float,
    cores: int,
    workdir: Path,
) -> list[Row]:
    rows = []
    for point in GRID:
        runs = real[point]
        cpq = statistics.median(r.cpu_per_query for r in runs)
        each = [capacity(point, r.cpu_per_query, cores) for r in runs]
        sim = measure_sim(point, model, visits, seed, speed, workdir)
        rows.append(
            Row(
                point=point,
                real_wall_rps=statistics.median(r.req_per_s for r in runs),
                real_cores=statistics.median(r.cores_used for r in runs),
                real_cpu_per_query=cpq,
                real_capacity=capacity(point, cpq, cores),
                real_low=min(each),
                real_high=max(each),
                sim_rps=sim.req_per_s / speed,  # in sim seconds: wall seconds x speed
                real_batch=statistics.median([r.nn_avg_batch for r in runs if r.nn_avg_batch] or [0.0]),
                sim_batch=sim.nn_avg_batch,
                model_rps=predict_throughput(point.cfg(), visits, point.analysis_threads, profile=PROFILE),
            )
        )
    return rows


def render(rows: Sequence[Row], *, visits: int, reps: int, seed: int, cores: int) -> str:
    out = [
        machine_line(SETTING),
        f"visits {visits}, {reps} interleaved repetitions per cfg (median), seed {seed}, {cores} cores, "
        f"load average now {os.getloadavg()[0]:.1f}",
        "",
        "| cfg (analysis x search, batch, servers) | real wall req/s | real cores | real CPU s/query "
        "| real req/s (capacity) | min-max over reps | sim req/s | error | model req/s | NN batch real / sim |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r.point.label} | {r.real_wall_rps:.2f} | {r.real_cores:.2f} | {r.real_cpu_per_query:.3f} "
            f"| {r.real_capacity:.2f} | {r.real_low:.2f}-{r.real_high:.2f} | {r.sim_rps:.2f} | {r.error:+.0%} "
            f"| {r.model_rps:.2f} | {r.real_batch:.2f} / {r.sim_batch:.2f} |"
        )
    rho = spearman([r.real_capacity for r in rows], [r.sim_rps for r in rows])
    worst = max(rows, key=lambda r: abs(r.error))
    resolved, agree = resolved_pairs(rows)
    out += [
        "",
        f"Spearman rank correlation (real capacity vs sim): {rho:.3f} (target >= 0.8); "
        f"vs the closed-form model: {spearman([r.real_capacity for r in rows], [r.model_rps for r in rows]):.3f}",
        f"worst per-point error: {worst.error:+.1%} at {worst.point.label} (target within 25%)",
        f"pairs the measurement tells apart: {resolved} of {len(rows) * (len(rows) - 1) // 2}; "
        f"the sim orders {agree} of them as the real engine",
    ]
    return "\n".join(out)


def _save(path: Path, real: dict[Point, list[EngineLoadResult]], meta: dict[str, object]) -> None:
    data = {
        "meta": meta,
        "points": [{"point": asdict(p), "runs": [asdict(r) for r in runs]} for p, runs in real.items()],
    }
    path.write_text(json.dumps(data, indent=1))


def _load(path: Path) -> dict[Point, list[EngineLoadResult]]:
    data = json.loads(path.read_text())
    real = {Point(**item["point"]): [EngineLoadResult(**r) for r in item["runs"]] for item in data["points"]}
    missing = [p.label for p in GRID if p not in real]
    if missing:
        raise SystemExit(f"{path}: no measurements for {missing}")
    return real


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kgbench.bench.calibration", description=__doc__.split("\n")[0])
    parser.add_argument("--visits", type=int, default=32)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sim-speed", type=float, default=1.0, help="KGSERVE_SIM_SPEED of the simulated runs")
    parser.add_argument("--cores", type=int, default=psutil.cpu_count(logical=True) or 1)
    parser.add_argument("--save", type=Path, help="write the real measurements here (JSON)")
    parser.add_argument("--load", type=Path, help="reuse real measurements saved with --save (no real engine run)")
    args = parser.parse_args(argv)
    model = os.environ.get("KGBENCH_KATAGO_MODEL", "")
    if not model or not Path(model).is_file():
        parser.error("KGBENCH_KATAGO_MODEL must name the network file (the b6c96 test network)")
    with tempfile.TemporaryDirectory(prefix="kgbench-calib-") as tmp:
        workdir = Path(tmp)
        if args.load:
            real = _load(args.load)
        else:
            binary = os.environ.get("KGBENCH_KATAGO_BIN", "")
            if not binary or not os.access(binary, os.X_OK):
                parser.error("KGBENCH_KATAGO_BIN must name an executable KataGo (Eigen build)")
            real = measure_real(binary, model, args.visits, args.reps, args.seed, workdir)
            if args.save:
                _save(
                    args.save,
                    real,
                    {"visits": args.visits, "reps": args.reps, "seed": args.seed, "machine": machine_line(SETTING)},
                )
        rows = build_rows(real, model, args.visits, args.seed, args.sim_speed, args.cores, workdir)
    reps = min(len(runs) for runs in real.values())  # with --load: what the file holds
    print(render(rows, visits=args.visits, reps=reps, seed=args.seed, cores=args.cores))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
