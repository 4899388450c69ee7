"""`python -m benchmarks.traffic SCENARIO --round N`: issue 35's measurements on the real CPU KataGo, one locked
batch a call (each under ~10 minutes: `flock /tmp/kg-measure.lock python -m benchmarks.traffic ...`).

Scenarios (every one `backend=eigen threads=cpu` with the binary and net of KGBENCH_KATAGO_BIN/KGBENCH_KATAGO_MODEL,
16 visits a turn as load=cpu, the contention check off and no race: the rounds are the replicates, the machine is
shared and its load is recorded instead):

    cache   load=review at nnCacheSizePowerOfTwo CACHE_SIZES (round 2 in the reverse order): turns/s, NN rows per visit
    pair    load=review without a table (-1) and with the default (23), alternating, 3 pairs (load.seed 0, 1, 2: each
            pair the same games): the cache's effect on turns/s, A/B
    grid    --traffic distinct|review: numAnalysisThreads 1,2,4 x numSearchThreadsPerAnalysisThread 1,2,4 (issue 28's
            real-CPU grid; round 2 reversed), load=cpu or its review twin
    doda    load=review against load=positions (one game a request vs one position a request, DodaGames' comparison)
            at 1 and 4 clients; round 2 the other order
    kinds   load=interactive and load=mixed, for their figures (latency per turn, partial reports)
    beside  --traffic batch|review|distinct: one job at threads=cpu (4 x 1) under load=batch (16 in flight, no maxVisits
            in the queries: the cfg's maxVisits=16), its review twin or load=cpu: issue 40's loads side by side
    h200    --sim only, --traffic batch|distinct|review: experiment=h200's grid (3 batch sizes x 2 thread counts) on the
            simulated H200 (its default profile), its own load=batch (512 in flight), distinct at 256 queries in flight
            or review at 8 games
    report  the tables for docs/ from every saved round

`--sim` runs a scenario's round on the simulated engine instead (`backend=sim`, the profile calibrated on this CPU
and net, `cpu-eigen-b6c96`, at real time): OUT/sim-<scenario>-r<N>.json, which the report sets beside the real one
(the sim's cache model, kgserve/sim/model/nncache.py, held against the real engine).

Each call runs `python -m kgbench` as a user would (its own MLflow store under OUT/<scenario>-r<N>/), records
`uptime` before and after and the load average every 5 s, and saves OUT/<scenario>-r<N>.json: the args, the machine,
every job's figures. `--smoke` runs two configs with short windows to check the harness itself.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mlflow.tracking import MlflowClient

from benchmarks.contention import LoadWatch
from kgbench.load.games.library import GAMES_DIR, game_files
from kgserve.paths import PROJECT_ROOT as REPO

__all__ = ["CACHE_SIZES", "main", "report"]

CACHE_SIZES = (-1, 4, 6, 8, 10, 12, 16, 23)  # -1: no table at all (KataGo's setting); 23: the analysis default
BASE = ["threads=cpu", "contention.check=false", "race.enabled=false", "load.max_visits=16"]
REVIEW_CPU = ["load=review", "load.concurrency=[2]", "load.warmup_s=8", "load.window_s=8", "load.min_windows=3",
              "load.max_windows=6", "load.tolerance=0.15"]  # fmt: skip
# load=batch on the CPU: 16 positions in flight (4 analysis threads), no maxVisits in the queries: the cfg's, 16
BATCH_CPU = ["load=batch", "load.concurrency=[16]", "maxVisits=16", "load.warmup_s=8", "load.window_s=8",
             "load.min_windows=3", "load.max_windows=6", "load.tolerance=0.15"]  # fmt: skip
LOADS = {"batch": BATCH_CPU, "review": REVIEW_CPU, "distinct": ["load=cpu"]}
GRID = {"numAnalysisThreads": (1, 2, 4), "numSearchThreadsPerAnalysisThread": (1, 2, 4)}
METRICS = ("req_per_s", "req_per_s_ci_low", "req_per_s_ci_high", "turns_per_s", "turns_per_s_ci_low",
           "turns_per_s_ci_high", "turn_p50_ms", "turn_p99_ms", "p50_ms", "p99_ms", "visits_per_s", "nn_rows",
           "nn_rows_per_visit", "visits_total", "turns_total", "nn_avg_batch_size", "errors", "timeouts",
           "host_cpu_busy_pct", "other_cpu_cores", "engine_cpu_cores", "frontend_cpu_cores", "headline_concurrency",
           "engine_start_s")  # fmt: skip


def _engine() -> list[str]:
    binary, model = os.environ.get("KGBENCH_KATAGO_BIN"), os.environ.get("KGBENCH_KATAGO_MODEL")
    if not binary or not model:
        raise SystemExit("set KGBENCH_KATAGO_BIN and KGBENCH_KATAGO_MODEL (docs/real-katago.md)")
    return [f"engine.binary={binary}", f"engine.model={model}"]


def _ordered(values: Sequence[Any], round_: int) -> str:
    return ",".join(str(v) for v in (values if round_ % 2 else list(reversed(values))))


def scenario_args(scenario: str, round_: int, traffic: str, smoke: bool) -> list[str]:
    """The kgbench arguments of one round (odd rounds in the given order, even rounds reversed)."""
    short = ["load.warmup_s=2", "load.window_s=2", "load.max_windows=3"] if smoke else []
    if scenario == "cache":
        sizes = (-1, 23) if smoke else CACHE_SIZES
        return [*REVIEW_CPU, f"nnCacheSizePowerOfTwo={_ordered(sizes, round_)}", *short]
    if scenario == "pair":  # load.seed varies slowest: -1, 23, -1, 23, ... (round 2: 23 first)
        seeds = "0,1" if smoke else "0,1,2"
        return [*REVIEW_CPU, f"load.seed={seeds}", f"nnCacheSizePowerOfTwo={_ordered((-1, 23), round_)}", *short]
    if scenario == "h200":
        # the experiment's own traffic is load=batch (issue 40); review and distinct name theirs
        h200_loads = {
            "review": ["load=review", "load.concurrency=[8]"],
            "distinct": ["load=default", "load.concurrency=[256]"],
        }
        return ["experiment=h200", *h200_loads.get(traffic, []), *short]
    if scenario == "beside":
        return [*LOADS[traffic], *short]
    if scenario == "grid":
        load = LOADS[traffic]
        grid = {"numAnalysisThreads": (1, 4), "numSearchThreadsPerAnalysisThread": (1,)} if smoke else GRID
        return [*load, *(f"{k}={_ordered(v, round_)}" for k, v in grid.items()), *short]
    windows = ["load.warmup_s=8", "load.window_s=8", "load.min_windows=3", "load.max_windows=6"]
    if scenario == "doda":
        loads = _ordered(("review", "positions"), round_)
        return [f"load={loads}", "load.concurrency=[1,4]", *windows, "load.tolerance=0.15", *short]
    if scenario == "kinds":
        loads = _ordered(("interactive", "mixed"), round_)
        return [f"load={loads}", "load.concurrency=[8]", *windows, "load.tolerance=0.2", *short]
    raise ValueError(f"unknown scenario {scenario!r}")


def _named(args: Sequence[str]) -> list[str]:
    """The args as saved: the engine's binary and net by their variables' names (the saved rounds are committed;
    the machine's paths stay out of them)."""
    names = {"engine.binary": "$KGBENCH_KATAGO_BIN", "engine.model": "$KGBENCH_KATAGO_MODEL"}
    return [f"{a.split('=', 1)[0]}={names[a.split('=', 1)[0]]}" if a.split("=", 1)[0] in names else a for a in args]


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


SIM_ENV = {"KGSERVE_SIM_PROFILE": "cpu-eigen-b6c96", "KGSERVE_SIM_DEVICE": "private", "KGSERVE_SIM_SPEED": "1"}


def _kgbench(folder: Path, args: Sequence[str], sim: bool = False) -> int:
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{folder / 'mlflow.db'}", "PYTHONUNBUFFERED": "1"}
    env.update(SIM_ENV if sim else {})
    if sim and "experiment=h200" in args:  # the simulated H200: the sim's default profile
        env.pop("KGSERVE_SIM_PROFILE", None)
    argv = [sys.executable, "-m", "kgbench", "-m", *args, f"hydra.sweep.dir={folder / 'multirun'}"]
    print("$", " ".join(argv[1:]), flush=True)
    with (folder / "kgbench.log").open("w") as log:
        return subprocess.call(argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)


def _jobs(folder: Path, sim: bool = False) -> list[dict[str, Any]]:
    client = MlflowClient(tracking_uri=f"sqlite:///{folder / 'mlflow.db'}")
    exp = client.get_experiment_by_name("kgbench-sim" if sim else "kgbench")
    runs = client.search_runs([exp.experiment_id], "tags.`kgbench.role` = 'job'") if exp else []
    out = []
    for run in sorted(runs, key=lambda r: r.info.start_time or 0):
        params, metrics = run.data.params, run.data.metrics
        threads = f"{params.get('katago.numAnalysisThreads')}x{params.get('katago.numSearchThreadsPerAnalysisThread')}"
        levels = client.get_metric_history(run.info.run_id, "level_turns_per_s")
        out.append({
            "run_id": run.info.run_id, "status": run.info.status, "name": run.info.run_name,
            "start": (run.info.start_time or 0) / 1000, "end": (run.info.end_time or 0) / 1000,
            "traffic": params.get("load.traffic"), "concurrency": params.get("load.concurrency"),
            "cache_pow": params.get("katago.nnCacheSizePowerOfTwo"), "seed": params.get("load.seed"),
            "threads": threads, **{k: metrics.get(k) for k in METRICS},
            "levels": {str(h.step): h.value for h in levels},
        })  # fmt: skip
    return out


def run_round(out: Path, scenario: str, round_: int, traffic: str, smoke: bool, sim: bool = False) -> dict[str, Any]:
    if scenario == "h200" and not sim:
        raise SystemExit("h200: the simulated H200 only (--sim); on the GPU node: python -m kgbench -m experiment=h200")
    name = (
        f"{'sim-' if sim else ''}{scenario}{'-' + traffic if scenario in ('grid', 'h200', 'beside') else ''}-r{round_}"
    )
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    engine = ["backend=sim"] if sim else ["backend=eigen", *_engine()]
    base = ["contention.check=false", "race.enabled=false"] if scenario == "h200" else BASE
    if traffic == "batch":  # the batch client's queries carry no maxVisits: BATCH_CPU sets the cfg's
        base = [a for a in base if not a.startswith("load.max_visits=")]
    args = [*base, *scenario_args(scenario, round_, traffic, smoke), *engine]
    record: dict[str, Any] = {"name": name, "scenario": scenario, "round": round_, "args": _named(args), "smoke": smoke}
    record.update(sim_env=SIM_ENV if sim else None, uptime_before=_uptime())
    # the self-play games there were when the round ran (review, interactive and mixed traffic draw from them)
    record["games"] = {size: len(game_files(GAMES_DIR, [size])) for size in (9, 13, 19)}
    with LoadWatch() as watch:
        record["exit_status"] = _kgbench(folder, args, sim)
    record["uptime_after"] = _uptime()
    loads = [load for _, load in watch.samples]
    record.update(load_avg_min=min(loads, default=math.nan), load_avg_max=max(loads, default=math.nan))
    record["jobs"] = _jobs(folder, sim)
    (out / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return record


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _by(records: Sequence[Mapping[str, Any]], key: str) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        for job in record["jobs"]:
            if job["status"] == "FINISHED":
                grouped.setdefault(str(job[key]), []).append(job)
    return grouped


CONTENDED_CORES = 0.25  # kgbench's own threshold on 2 cores (kgbench/track/contention.py): other processes' cores


def _contended(job: Mapping[str, Any]) -> bool:
    """A job other processes ran beside (kgbench's rule; the rounds ran with the check off, so it is applied here)."""
    other = job.get("other_cpu_cores")
    return other is not None and float(other) >= CONTENDED_CORES


def _table(title: str, groups: Mapping[str, list[dict[str, Any]]], columns: Sequence[str]) -> str:
    """Each config's value per round (`c`: a contended job, left out of the mean), and the mean of the clean ones."""
    header = "| config | rounds | " + " | ".join(columns) + " |"
    lines = [f"### {title}", "", header, "|---|---:|" + "---:|" * len(columns)]
    for config, jobs in groups.items():
        cells = []
        for column in columns:
            shown, clean = [], []
            for job in jobs:
                value = job.get(column)
                if value is None or not math.isfinite(float(value)):
                    continue
                shown.append(f"{float(value):.3g}" + ("c" if _contended(job) else ""))
                clean += [] if _contended(job) else [float(value)]
            mean = f" (clean mean {_mean(clean):.3g})" if len(shown) > 1 and clean else ""
            cells.append(" / ".join(shown) + mean)
        lines.append(f"| {config} | {len(jobs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _means(records: Sequence[Mapping[str, Any]], key: str, metric: str) -> dict[str, float]:
    groups = _by(records, key)
    return {
        config: _mean([float(j[metric]) for j in jobs if j.get(metric) is not None and math.isfinite(float(j[metric]))])
        for config, jobs in groups.items()
    }


def cache_shares(saved: Sequence[Mapping[str, Any]]) -> str:
    """The sim cache model's shares from the real rounds (kgserve/sim/model/nncache.py): without a table a search
    evaluates r(-1) rows a visit; one position a request after the move before (load=positions: that search finished)
    finds PARENT = 1 - r(positions) / r(-1) of its rows in the table; a review's turns run beside the move before's
    (its analysis threads take the turns in order), which is met CONCURRENT of the way: 1 - r(review, 23) / r(-1) =
    PARENT x CONCURRENT."""
    cache = [r for r in saved if r["name"].rsplit("-r", 1)[0] == "cache"]
    doda = [r for r in saved if r["name"].rsplit("-r", 1)[0] == "doda"]
    rows = _means(cache, "cache_pow", "nn_rows_per_visit")
    positions = _means(doda, "traffic", "nn_rows_per_visit").get("interactive")
    if "-1" not in rows or "23" not in rows or positions is None:
        return "cache shares: needs the cache rounds (-1 and 23) and the doda rounds"
    parent = 1.0 - positions / rows["-1"]
    review_hit = 1.0 - rows["23"] / rows["-1"]
    return (
        f"cache shares: r(-1) {rows['-1']:.3f}, r(review, 23) {rows['23']:.3f}, r(positions, 23) {positions:.3f}: "
        f"PARENT {parent:.3f}, review hit {review_hit:.3f}, CONCURRENT {review_hit / parent:.3f}"
    )


def report(out: Path) -> str:
    saved = [json.loads(p.read_text()) for p in sorted(out.glob("*-r[0-9]*.json"))]
    parts = []
    for scenario, key, columns in (
        ("cache", "cache_pow", ("turns_per_s", "nn_rows_per_visit", "turn_p50_ms", "visits_per_s")),
        ("sim-cache", "cache_pow", ("turns_per_s", "nn_rows_per_visit", "turn_p50_ms", "visits_per_s")),
        ("pair", "cache_pow", ("turns_per_s", "nn_rows_per_visit", "engine_cpu_cores", "other_cpu_cores")),
        ("sim-doda", "traffic", ("turns_per_s", "nn_rows_per_visit", "turn_p50_ms", "p50_ms")),
        ("grid-distinct", "threads", ("req_per_s", "turns_per_s", "nn_rows_per_visit", "p99_ms")),
        ("grid-review", "threads", ("turns_per_s", "req_per_s", "nn_rows_per_visit", "turn_p50_ms")),
        ("grid-batch", "threads", ("turns_per_s", "nn_rows_per_visit", "p50_ms", "p99_ms", "errors")),
        ("beside-batch", "name", ("turns_per_s", "req_per_s", "nn_rows_per_visit", "turn_p50_ms", "p99_ms")),
        ("beside-review", "name", ("turns_per_s", "req_per_s", "nn_rows_per_visit", "turn_p50_ms", "p99_ms")),
        ("beside-distinct", "name", ("turns_per_s", "req_per_s", "nn_rows_per_visit", "turn_p50_ms", "p99_ms")),
        ("doda", "traffic", ("turns_per_s", "nn_rows_per_visit", "turn_p50_ms", "p50_ms")),
        ("kinds", "traffic", ("turns_per_s", "req_per_s", "p50_ms", "p99_ms", "nn_rows_per_visit")),
        ("sim-h200-distinct", "name", ("turns_per_s", "nn_rows_per_visit", "p99_ms")),
        ("sim-h200-review", "name", ("turns_per_s", "nn_rows_per_visit", "turn_p50_ms")),
    ):
        records = [r for r in saved if r["name"].rsplit("-r", 1)[0] == scenario]
        if records:
            loads = ", ".join(f"r{r['round']}: {r['load_avg_min']:.2f}-{r['load_avg_max']:.2f}" for r in records)
            parts.append(_table(f"{scenario} (load average {loads})", _by(records, key), columns))
    parts.append(cache_shares(saved))
    return "\n\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.traffic", description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", choices=["cache", "pair", "grid", "doda", "kinds", "beside", "h200", "report"])
    p.add_argument("--round", type=int, default=1, help="1, 2, ...: even rounds run the configs in reverse order")
    p.add_argument("--traffic", choices=list(LOADS), default="review", help="grid, beside, h200: the traffic")
    p.add_argument("--out", type=Path, default=Path("bench-traffic"))
    p.add_argument("--smoke", action="store_true", help="two configs, short windows: checks the harness only")
    p.add_argument("--sim", action="store_true", help="the simulated engine (cpu-eigen-b6c96) instead of KataGo")
    args = p.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.scenario == "report":
        print(report(out))
        return 0
    record = run_round(out, args.scenario, args.round, args.traffic, args.smoke, args.sim)
    print(f"{record['name']}: {len(record['jobs'])} job(s), exit {record['exit_status']}; {out / record['name']}.json")
    return 0 if record["exit_status"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
