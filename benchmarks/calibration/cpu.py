"""The sim's CPU (Eigen) profile held against a real KataGo: same grid, same load, table of req/s.

``python -m benchmarks.calibration [--reps 3] [--visits 32] [--save real.json | --load real.json]``

Needs ``KGBENCH_KATAGO_BIN`` (a KataGo built with the Eigen backend) and ``KGBENCH_KATAGO_MODEL`` (the network
the profile models: the b6c96 test network). For every cfg of the grid, the real engine and the simulated one
(``KGSERVE_SIM_PROFILE=cpu-eigen-b6c96``) get the same closed-loop load over their stdin pipe
(``kgbench.enginepipe.engineload``): ``queries`` 19x19 positions of ``visits`` visits, ``numAnalysisThreads`` in flight.

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
from dataclasses import asdict
from pathlib import Path

import psutil

from benchmarks.calibration.grid import GRID, Point, capacity, usable_cores
from benchmarks.calibration.table import SETTING, Row, render, resolved_pairs, spearman
from kgbench.enginepipe.engineload import EngineLoadResult, nineteen_by_nineteen, run_engine_load_sync
from kgbench.track.machine import machine_line
from kgserve.sim.model.throughput import predict_throughput

# the grid and the table live in their own modules; re-exported here, the script's one public face
__all__ = ["GRID", "Point", "Row", "capacity", "main", "resolved_pairs", "spearman", "usable_cores"]

PROFILE = "cpu-eigen-b6c96"


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
    parser = argparse.ArgumentParser(prog="python -m benchmarks.calibration", description=__doc__.split("\n")[0])
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
