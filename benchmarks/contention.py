"""`python -m benchmarks.contention SCENARIO`: issue 28's measurements on the real CPU KataGo, one command each.

The grid: numAnalysisThreads 1,2,4 x numSearchThreadsPerAnalysisThread 1,2,4 with `backend=eigen threads=cpu
load=cpu`, the binary and net from KGBENCH_KATAGO_BIN / KGBENCH_KATAGO_MODEL (docs/real-katago.md).

    python -m benchmarks.contention quiet  --out bench-contention     # the grid on a quiet machine
    python -m benchmarks.contention busy   --out bench-contention     # again, two busy loops started partway
    python -m benchmarks.contention search --out bench-contention     # 5 seeds of a search of the grid, after quiet
    python -m benchmarks.contention report --out bench-contention     # the tables for docs/, from the saved runs

Each scenario runs `python -m kgbench` as a user would (its own MLflow store under OUT/SCENARIO/), samples the
host's load average every few seconds meanwhile, then saves OUT/SCENARIO.json: the date, the machine (cores, load
average before, during and after), every job (config, req/s and interval, start and end, other_cpu_cores and the
host's busy share over its windows, contended or not and why, re-measures, race replicates) and promote's verdict
(`--dry-run`). So a run on a machine that was not quiet shows it, job by job. `busy` also records when its two busy
loops ran and which jobs overlapped them; `search` needs OUT/quiet.json: each seed's search gets a third of the quiet
grid's job-seconds as its budget (`hydra.sweeper.budget_s`, n_trials 9 the cap) and starts at KataGo's advice (the
sweeper's default `start: katago`); the report compares each seed's pick with the quiet grid's best (by its means)
and its job-seconds with the quiet grid's. `--smoke` runs a 2-config grid with short windows to check the harness
itself (its figures mean nothing).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mlflow.tracking import MlflowClient

from kgserve.paths import PROJECT_ROOT as REPO

__all__ = ["GRID", "main", "report"]

GRID = ["numAnalysisThreads=1,2,4", "numSearchThreadsPerAnalysisThread=1,2,4"]
BASE = ["backend=eigen", "threads=cpu", "load=cpu"]
SMOKE = ["numAnalysisThreads=1,4", "numSearchThreadsPerAnalysisThread=1", "load.window_s=1", "load.warmup_s=1",
         "contention.settle_s=5"]  # fmt: skip
SEARCH = [
    "hparams_search=optuna", "hydra.sweeper.n_trials=9",  # the cap; budget_s (a third of the grid's seconds) decides
    "~hydra.sweeper.params.nnMaxBatchSize", "~hydra.sweeper.params.numNNServerThreadsPerModel",
    "hydra.sweeper.params.numAnalysisThreads='tag(ordered, choice(1, 2, 4))'",
    "numSearchThreadsPerAnalysisThread=tag(ordered, choice(1, 2, 4))",
    "load.order=given",  # load=cpu has one level: nothing to order
    "race.enabled=false",  # the search's own pick, at the search's own cost
]  # fmt: skip


def _engine() -> list[str]:
    binary, model = os.environ.get("KGBENCH_KATAGO_BIN"), os.environ.get("KGBENCH_KATAGO_MODEL")
    if not binary or not model:
        raise SystemExit("set KGBENCH_KATAGO_BIN and KGBENCH_KATAGO_MODEL (docs/real-katago.md)")
    return [f"engine.binary={binary}", f"engine.model={model}"]


class LoadWatch:
    """The host's 1-minute load average every `interval_s`, with the time (what `uptime` shows)."""

    def __init__(self, interval_s: float = 5.0) -> None:
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.interval_s = interval_s

    def _run(self) -> None:
        while True:
            self.samples.append((time.time(), os.getloadavg()[0]))
            if self._stop.wait(self.interval_s):
                return

    def __enter__(self) -> LoadWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


@contextlib.contextmanager
def busy_loops(count: int, after_s: float, for_s: float, record: dict[str, Any]) -> Iterator[None]:
    """`count` processes that wait `after_s`, then spin on a core for `for_s` (bounded); their times in `record`."""
    code = f"import time\ntime.sleep({after_s})\nend = time.time() + {for_s}\nwhile time.time() < end: pass"
    started = time.time()
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]
    record.update(busy_loops=count, busy_start=started + after_s, busy_end=started + after_s + for_s)
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def _kgbench(folder: Path, args: Sequence[str], log: Path) -> int:
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{folder / 'mlflow.db'}", "PYTHONUNBUFFERED": "1"}
    env["KGBENCH_CONTENTION_CHECK"] = "true"  # the product's default, whatever the shell says
    argv = [sys.executable, "-m", "kgbench", "-m", *args, f"hydra.sweep.dir={folder / 'multirun'}"]
    print("$", " ".join(argv[1:]), flush=True)
    with log.open("w") as out:
        return subprocess.call(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)


def _promote(folder: Path) -> str:
    # the sweep's own runtime (a CPU sweep never goes into the tracked GPU runtime: promote refuses to cross),
    # --dry-run: the verdict, written nowhere
    argv = [sys.executable, "-m", "kgbench.promote", "--tracking-uri", f"sqlite:///{folder / 'mlflow.db'}",
            "--dry-run", "--explain", "--runtime-dir", str(folder / "runtime")]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
    return done.stdout + done.stderr


def _metric(run: Any, key: str) -> float | None:
    value = run.data.metrics.get(key)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _config(params: Mapping[str, str]) -> str:
    """numAnalysisThreads x numSearchThreadsPerAnalysisThread, e.g. 4x1."""
    return f"{params.get('katago.numAnalysisThreads')}x{params.get('katago.numSearchThreadsPerAnalysisThread')}"


def _jobs(folder: Path) -> list[dict[str, Any]]:
    client = MlflowClient(tracking_uri=f"sqlite:///{folder / 'mlflow.db'}")
    exp = client.get_experiment_by_name("kgbench")
    if exp is None:
        return []
    runs = client.search_runs([exp.experiment_id], "tags.`kgbench.role` = 'job'", max_results=1000)
    out = []
    for run in sorted(runs, key=lambda r: r.info.start_time or 0):
        tags, params = run.data.tags, run.data.params
        out.append({
            "run_id": run.info.run_id,
            "config": _config(params),
            "status": run.info.status,
            "start": (run.info.start_time or 0) / 1000, "end": (run.info.end_time or 0) / 1000,
            **{k: _metric(run, k) for k in ("req_per_s", "req_per_s_ci_low", "req_per_s_ci_high", "p99_ms",
                                             "other_cpu_cores", "host_cpu_busy_pct", "host_cpu_steal_pct",
                                             "contention_other_cpu_cores_max", "contention_remeasures",
                                             "contended_windows", "judged_windows")},
            "contended": tags.get("kgbench.contended"), "contention": tags.get("kgbench.contention", ""),
            "attempts": tags.get("kgbench.contention_attempts", ""),
            "race_of": tags.get("kgbench.race_of"), "race_round": tags.get("kgbench.race_round"),
            "trial": tags.get("optuna.trial"),
        })  # fmt: skip
    return out


def _machine(watch: LoadWatch) -> dict[str, Any]:
    loads = [load for _, load in watch.samples]
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cores": os.cpu_count(),
        "load_avg_samples": watch.samples,
        "load_avg_min": min(loads, default=math.nan),
        "load_avg_max": max(loads, default=math.nan),
    }


def run_grid(out: Path, name: str, smoke: bool, busy: tuple[float, float] | None) -> dict[str, Any]:
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    args = [*BASE, *(SMOKE if smoke else GRID), *_engine()]
    if busy is not None:  # a flagged job waits for the loops to end before its re-measure
        args.append(f"contention.settle_s={busy[1] + 60:g}")
    record: dict[str, Any] = {"scenario": name, "args": args, "smoke": smoke}
    with LoadWatch() as watch:
        context = busy_loops(2, *busy, record) if busy else contextlib.nullcontext()
        with context:
            record["exit_status"] = _kgbench(folder, args, folder / "kgbench.log")
    record.update(_machine(watch), jobs=_jobs(folder), promote=_promote(folder))
    if busy:
        for job in record["jobs"]:
            job["overlapped_busy_loops"] = job["start"] < record["busy_end"] and job["end"] > record["busy_start"]
    return record


def grid_seconds(quiet: Mapping[str, Any]) -> float:
    """The quiet grid's job-seconds: its jobs' MLflow spans, race replicates left out."""
    return float(sum(j["end"] - j["start"] for j in quiet["jobs"] if not j["race_of"]))


def search_budget_s(out: Path) -> float:
    """A third of the quiet grid's job-seconds (OUT/quiet.json): the search's hydra.sweeper.budget_s."""
    path = out / "quiet.json"
    if not path.exists():
        raise SystemExit(f"search: {path} is missing: run `python -m benchmarks.contention quiet --out {out}` first "
                         "(the search's budget is a third of the quiet grid's job-seconds)")  # fmt: skip
    grid_s = grid_seconds(json.loads(path.read_text()))
    if grid_s <= 0:
        raise SystemExit(f"search: {path} holds no grid job: run `quiet` again")
    return grid_s / 3


def run_search(out: Path, seeds: Sequence[int], smoke: bool) -> dict[str, Any]:
    budget_s = search_budget_s(out)
    record: dict[str, Any] = {"scenario": "search", "seeds": [], "budget_s": budget_s}
    with LoadWatch() as watch:
        for seed in seeds:
            folder = out / f"search-{seed}"
            folder.mkdir(parents=True, exist_ok=True)
            journal = folder / "study.journal"
            args = [*BASE, *SEARCH, *(SMOKE[2:] if smoke else []), *_engine(),
                    f"hydra.sweeper.sampler.seed={seed}", f"hydra.sweeper.journal={journal}",
                    f"hydra.sweeper.study_name=contention-{seed}",
                    f"hydra.sweeper.budget_s={budget_s:.3f}"]  # fmt: skip
            status = _kgbench(folder, args, folder / "kgbench.log")
            results = folder / "multirun" / "optimization_results.yaml"
            record["seeds"].append({"seed": seed, "exit_status": status, "jobs": _jobs(folder),
                                    "results": results.read_text() if results.exists() else ""})  # fmt: skip
    record.update(_machine(watch))
    return record


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def grid_table(record: Mapping[str, Any]) -> str:
    lines = [
        f"{record['scenario']}: {record['date']}, {record['cores']} cores, load average "
        f"{record['load_avg_min']:.2f}-{record['load_avg_max']:.2f} while it ran"
        + (f"; two busy loops from +{record['busy_start'] - record['jobs'][0]['start']:.0f} s for "
           f"{record['busy_end'] - record['busy_start']:.0f} s" if record.get("busy_loops") and record["jobs"] else ""),
        "",
        "| job | config | req/s [95% interval] | other CPU (cores) | host busy % | contended | re-measures | "
        "overlapped the loops | race round |",
        "|---|---|---|---:|---:|---|---:|---|---|",
    ]  # fmt: skip
    for i, job in enumerate(record["jobs"]):
        interval = f"[{_fmt(job['req_per_s_ci_low'])}, {_fmt(job['req_per_s_ci_high'])}]"
        lines.append(
            f"| {i + 1} | {job['config']} | {_fmt(job['req_per_s'])} {interval} | {_fmt(job['other_cpu_cores'])} "
            f"| {_fmt(job['host_cpu_busy_pct'], 0)} | {job['contended']} | {_fmt(job['contention_remeasures'], 0)} "
            f"| {job.get('overlapped_busy_loops', '-')} | {job['race_round'] or '-'} |"
        )
    verdict = [ln for ln in record["promote"].splitlines() if ln.startswith(("decision:", "winner:", "set aside"))]
    return "\n".join([*lines, "", *verdict])


def quiet_means(quiet: Mapping[str, Any]) -> dict[str, float]:
    """Each config's mean req/s over the quiet run's uncontended jobs (grid jobs and race replicates)."""
    values: dict[str, list[float]] = {}
    for job in quiet["jobs"]:
        if job["req_per_s"] is not None and job["contended"] != "true":
            values.setdefault(job["config"], []).append(job["req_per_s"])
    return {config: sum(v) / len(v) for config, v in values.items()}


def search_table(search: Mapping[str, Any], quiet: Mapping[str, Any]) -> str:
    means = quiet_means(quiet)
    if not means:
        return "search: the quiet run has no uncontended job to compare with (it was not quiet): run `quiet` again"
    best = max(means.values())
    grid_s = grid_seconds(quiet)
    budget = f", the search's budget_s {search['budget_s']:.1f}" if search.get("budget_s") else ""
    lines = [
        f"search: {search['date']}, load average {search['load_avg_min']:.2f}-{search['load_avg_max']:.2f}; quiet "
        f"grid best {best:.2f} req/s ({max(means, key=lambda c: means[c])}), grid job-seconds {grid_s:.0f}{budget}",
        "",
        "| seed | configs measured | pick | pick's quiet mean / grid best | job-seconds (share of grid) | verdict |",
        "|---:|---|---|---:|---:|---|",
    ]
    passed = 0
    for seed in search["seeds"]:
        jobs = [j for j in seed["jobs"] if not j["race_of"]]
        spent = sum(j["end"] - j["start"] for j in jobs)
        clean = [j for j in jobs if j["req_per_s"] is not None and j["contended"] != "true"]
        pick = max(clean, key=lambda j: j["req_per_s"])["config"] if clean else "-"
        reached = means.get(pick, math.nan) / best
        ok = reached >= 0.95 and spent <= grid_s / 3
        passed += ok
        lines.append(f"| {seed['seed']} | {', '.join(j['config'] for j in jobs)} | {pick} | {reached:.3f} "
                     f"| {spent:.0f} ({spent / grid_s:.0%}) | {'pass' if ok else 'FAIL'} |")  # fmt: skip
    lines.append(
        f"\n{passed} of {len(search['seeds'])} seeds within 5% of the grid's best at <= 1/3 of its job-seconds"
    )
    return "\n".join(lines)


def report(out: Path) -> str:
    parts = []
    saved = {name: json.loads((out / f"{name}.json").read_text()) for name in ("quiet", "busy", "search")
             if (out / f"{name}.json").exists()}  # fmt: skip
    for name in ("quiet", "busy"):
        if name in saved:
            parts.append(grid_table(saved[name]))
    if "busy" in saved:
        busy = saved["busy"]["jobs"]
        overlapped = [j for j in busy if j.get("overlapped_busy_loops")]
        flagged = [j for j in overlapped if "contended (" in j["attempts"]]
        quiet_flagged = sum("contended (" in j["attempts"] for j in saved.get("quiet", {}).get("jobs", []))
        parts.append(f"busy: {len(flagged)} of {len(overlapped)} jobs that overlapped the loops were flagged "
                     f"(and re-measured); quiet jobs flagged: {quiet_flagged}")  # fmt: skip
    if "search" in saved and "quiet" in saved:
        parts.append(search_table(saved["search"], saved["quiet"]))
    return "\n\n".join(parts) or f"nothing saved in {out} yet"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.contention", description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", choices=["quiet", "busy", "search", "report"])
    p.add_argument("--out", type=Path, default=Path("bench-contention"))
    p.add_argument("--busy-after", type=float, default=90.0, help="busy: seconds into the sweep the loops start")
    p.add_argument("--busy-for", type=float, default=120.0, help="busy: how long they spin")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--smoke", action="store_true", help="a 2-config grid, short windows: checks the harness only")
    args = p.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.scenario == "report":
        print(report(out))
        return 0
    if args.scenario == "search":
        record = run_search(out, args.seeds, args.smoke)
    else:
        busy = (args.busy_after, args.busy_for) if args.scenario == "busy" else None
        record = run_grid(out, args.scenario, args.smoke, busy)
    (out / f"{args.scenario}.json").write_text(json.dumps(record, indent=1))
    print(report(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
