"""`python -m benchmarks.search_faults --out DIR`: issue 36's search failures, each run as a user meets it, with what
came of it in figures (jobs run, configs measured twice, the best reported and whether a job of that search
measured it, exit status and traceback), on the simulated engine (KGSERVE_SIM_SPEED=20, load=smoke at 4 in flight).

    python -m benchmarks.search_faults --out bench-search-faults                 # this checkout
    python -m benchmarks.search_faults --out bench-base --tree /tmp/base-tree    # another checkout's kgbench

``--tree`` runs another checkout's `python -m kgbench` (its own code and conf/; e.g. `git archive` of main before
the fix) with the same scenarios, so the two tables compare. The journal and the MLflow runs are read here (Optuna's
journal format is the same). Scenarios (``--only`` picks some):

- fixed: a search over numAnalysisThreads (4, 8), then the same with nnMaxBatchSize=1
  numSearchThreadsPerAnalysisThread=1 fixed: the second's jobs and its best;
- narrow: a search over numAnalysisThreads (4, 8, 16) that measures 16, then one over (4, 8) on the same journal;
- kill: a search SIGKILLed (its whole process group) while its first job (the start) measures, then the same
  command again: is the killed config measured, and are trials left running;
- two: two sweepers at once on one study (numAnalysisThreads 2, 4 x engines 0, 1: engines=0 fails at once) and one
  sqlite MLflow store: jobs per config, failed values passed on, do both report the same best;
- journal: a journal with a corrupt second line, and a journal path under a file: exit status, traceback, message;
- overhead (this checkout only, in this process): what the new parts cost a search: its condition (the binary and
  network hashed: the sim's, and KGBENCH_KATAGO_BIN / KGBENCH_KATAGO_MODEL when set), the ask lock taken and let
  go, and one ask round under it (reap, requeue, ask, lease) on a study of 200 trials.

DIR/results.json holds every figure and each run's output tail; the table is printed (`--report` prints it again).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import optuna
from mlflow.tracking import MlflowClient
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from kgserve.paths import PROJECT_ROOT as REPO

__all__ = ["SCENARIOS", "main", "table"]

SEARCH = ["-m", "backend=sim", "load=smoke", "load.concurrency=[4]", "hparams_search=optuna",
          "hydra.sweeper.params=null", "hydra.sweeper.sampler.seed=0"]  # fmt: skip
ENV = {"KGSERVE_SIM_SPEED": "20", "KGBENCH_CONTENTION_CHECK": "false", "PYTHONUNBUFFERED": "1"}
BEST = re.compile(r"Best trial (\d+)(?:, copied from \S+)?: (\{.*?\}) -> (\S+) ")
SCENARIOS = ("fixed", "narrow", "kill", "two", "journal", "overhead")


class Runner:
    """`python -m kgbench` of a checkout, in a scenario's folder, with that folder's MLflow store."""

    def __init__(self, tree: Path, folder: Path) -> None:
        self.tree, self.folder = tree, folder
        folder.mkdir(parents=True, exist_ok=True)
        self.store = f"sqlite:///{folder / 'mlflow.db'}"
        self.runs = 0

    def env(self) -> dict[str, str]:
        return {**os.environ, **ENV, "MLFLOW_TRACKING_URI": self.store, "KGSERVE_SIM_DEVICE": f"faults-{os.getpid()}"}

    def argv(self, args: Sequence[str]) -> list[str]:
        self.runs += 1
        return [sys.executable, "-m", "kgbench", *args, f"hydra.sweep.dir={self.folder / f'multirun-{self.runs}'}"]

    def run(self, *args: str) -> tuple[int, str]:
        done = subprocess.run(self.argv(args), cwd=self.tree, env=self.env(), capture_output=True, text=True,
                              timeout=900)  # fmt: skip
        return done.returncode, done.stdout + done.stderr

    def start(self, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.folder / f"background-{self.runs + 1}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(self.argv(args), cwd=self.tree, env=self.env(), stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        return proc, log

    def jobs(self) -> list[Any]:
        client = MlflowClient(tracking_uri=self.store)
        ids = [e.experiment_id for e in client.search_experiments() if e.name in ("kgbench", "kgbench-sim")]
        return client.search_runs(ids, "tags.`kgbench.role` = 'job'", max_results=500) if ids else []


def _trials(journal: Path) -> list[optuna.trial.FrozenTrial]:
    """Every trial of every study in the journal (a search before issue 36 has one study, after it one a condition)."""
    storage = JournalStorage(JournalFileBackend(str(journal)))
    return [t for s in optuna.get_all_study_summaries(storage) for t in optuna.load_study(
        study_name=s.study_name, storage=storage).trials]  # fmt: skip


def _best(out: str) -> dict[str, Any] | None:
    found = BEST.findall(out)
    if not found:
        return None
    number, params, value = found[-1]
    return {"trial": int(number), "params": params, "value": float(value)}


def _own(best: dict[str, Any] | None, runs: Sequence[Any]) -> bool | None:
    """Whether a job of these runs measured the best's value (MLflow keeps 4 significant digits)."""
    if best is None:
        return None
    values = [r.data.metrics.get("req_per_s") for r in runs if r.info.status == "FINISHED"]
    return any(v is not None and math.isclose(v, best["value"], rel_tol=2e-3) for v in values)


def _tail(out: str) -> str:
    return "\n".join(out.splitlines()[-15:])


def fixed(runner: Runner) -> dict[str, Any]:
    journal = runner.folder / "study.journal"
    args = [*SEARCH, f"hydra.sweeper.journal={journal}", "numAnalysisThreads=tag(ordered, choice(4, 8))",
            "hydra.sweeper.n_trials=2"]  # fmt: skip
    code_a, _ = runner.run(*args)
    before = {r.info.run_id for r in runner.jobs()}
    code, out = runner.run(*args, "nnMaxBatchSize=1", "numSearchThreadsPerAnalysisThread=1")
    own = [r for r in runner.jobs() if r.info.run_id not in before]
    best = _best(out)
    return {"exit": code, "traceback": "Traceback" in out, "jobs": len(own), "best": best,
            "best_measured_by_it": _own(best, own), "first_exit": code_a, "tail": _tail(out)}  # fmt: skip


def narrow(runner: Runner) -> dict[str, Any]:
    journal = runner.folder / "study.journal"
    base = [*SEARCH, f"hydra.sweeper.journal={journal}", "hydra.sweeper.n_trials=1"]
    code_a, _ = runner.run(*base, "numAnalysisThreads=tag(ordered, choice(4, 8, 16))")  # the start: 16
    before = {r.info.run_id for r in runner.jobs()}
    code, out = runner.run(*base, "numAnalysisThreads=tag(ordered, choice(4, 8))")
    own = [r for r in runner.jobs() if r.info.run_id not in before]
    best = _best(out)
    errors = re.findall(r"^(\w+Error): ", out, re.MULTILINE)
    return {"exit": code, "traceback": "Traceback" in out, "error": errors[-1] if errors else None, "jobs": len(own),
            "threads_run": sorted(r.data.params.get("katago.numAnalysisThreads") for r in own), "best": best,
            "best_measured_by_it": _own(best, own), "first_exit": code_a, "tail": _tail(out)}  # fmt: skip


def kill(runner: Runner) -> dict[str, Any]:
    journal = runner.folder / "study.journal"
    args = [*SEARCH, f"hydra.sweeper.journal={journal}", "numAnalysisThreads=tag(ordered, choice(4, 8))",
            "hydra.sweeper.n_trials=2"]  # fmt: skip
    proc, log = runner.start(*args)
    deadline = time.monotonic() + 300
    while b"measure w0" not in log.read_bytes() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    killed = [t.params for t in _trials(journal) if t.state == TrialState.RUNNING]
    code, out = runner.run(*args)
    trials = _trials(journal)
    measured = [
        t.params for t in trials if t.state == TrialState.COMPLETE and "kgbench.reused_from" not in t.user_attrs
    ]
    return {"exit": code, "traceback": "Traceback" in out, "killed_running": len(killed),
            "killed_measured_on_rerun": bool(killed) and all(p in measured for p in killed),
            "left_running": sum(t.state == TrialState.RUNNING for t in trials), "configs_measured": len(measured),
            "best": _best(out), "tail": _tail(out)}  # fmt: skip


def _two_counts(runner: Runner, journal: Path, outs: Sequence[str]) -> dict[str, Any]:
    """Jobs per config (by each job's overrides: a job that fails before logging its params has none), failed values
    passed on, and the bests of two sweepers' outputs."""
    runs = runner.jobs()
    per_config = Counter(r.data.tags.get("hydra_overrides", "?") for r in runs)
    trials = {t.number: t for t in _trials(journal)}
    failed = {n for n, t in trials.items() if t.user_attrs.get("kgbench.failed")}
    passed_on = [t.number for t in trials.values() if t.user_attrs.get("kgbench.reused_from") in failed
                 and t.value is not None]  # fmt: skip
    bests = [_best(out) for out in outs]
    most = max(per_config.values(), default=0)
    return {"jobs": len(runs), "configs": len(per_config), "most_jobs_of_one_config": most,
            "failed_values_passed_on": len(passed_on), "bests": bests,
            "same_best": bests[0] is not None and bests[0] == bests[1],
            "best_is_a_failed_job": any(b is not None and b["trial"] in failed for b in bests)}  # fmt: skip


def two(runner: Runner) -> dict[str, Any]:
    journal = runner.folder / "study.journal"
    args = [*SEARCH, f"hydra.sweeper.journal={journal}", "numAnalysisThreads=tag(ordered, choice(2, 4))",
            "engines=choice(0, 1)", "hydra.sweeper.n_trials=4"]  # fmt: skip
    MlflowClient(tracking_uri=runner.store).search_experiments()  # the store made first (its schema, once)
    started = [runner.start(*args) for _ in range(2)]
    for proc, _ in started:
        proc.wait(timeout=900)
    outs = [log.read_text() for _, log in started]
    return {"exits": [p.returncode for p, _ in started], "traceback": any("Traceback" in o for o in outs),
            **_two_counts(runner, journal, outs), "tails": [_tail(o) for o in outs]}  # fmt: skip


def recount_two(folder: Path, tree: Path, results: dict[str, Any]) -> None:
    """The two sweepers' figures counted again from the saved MLflow store, journal and outputs (no run)."""
    runner = Runner(tree, folder / "two")
    logs = sorted(runner.folder.glob("background-*.log"))
    results["scenarios"]["two"].update(
        _two_counts(runner, runner.folder / "study.journal", [p.read_text() for p in logs])
    )


def journal_faults(runner: Runner) -> dict[str, Any]:
    corrupt = runner.folder / "corrupt.journal"
    corrupt.write_text('{"op_code":0,"worker_id":"w","study_name":"x","directions":[1]}\n{not json\n')
    blocker = runner.folder / "a-file"
    blocker.write_text("not a folder")
    out: dict[str, Any] = {}
    for name, path in (("corrupt", corrupt), ("unwritable", blocker / "j.journal")):
        code, text = runner.run(
            *SEARCH, "numAnalysisThreads=tag(ordered, choice(4, 8))", f"hydra.sweeper.journal={path}"
        )
        lines = [line for line in text.splitlines() if str(path) in line and "Traceback" not in line]
        out[name] = {"exit": code, "traceback": "Traceback" in text, "jobs": len(runner.jobs()),
                     "message": lines[-1] if lines else text.splitlines()[-1]}  # fmt: skip
    return {"cases": out}


def _mean_ms(action: Any, times: int) -> float:
    started = time.perf_counter()
    for _ in range(times):
        action()
    return round((time.perf_counter() - started) / times * 1000, 3)


def overhead(runner: Runner) -> dict[str, Any]:
    from kgbench.search.asking import ask_new, requeue_lost
    from kgbench.search.journal import ask_lock, open_storage
    from kgbench.search.lease import LeaseKeeper, reap_lost
    from kgbench.search.space import parse_space
    from kgbench.sweep.search_hooks import _digest, file_identity

    out: dict[str, Any] = {"hash_ms": {}}
    files = {"sim network": REPO / "assets" / "sim" / "kgsim-b40c768.bin.gz",
             "KGBENCH_KATAGO_BIN": os.environ.get("KGBENCH_KATAGO_BIN"),
             "KGBENCH_KATAGO_MODEL": os.environ.get("KGBENCH_KATAGO_MODEL")}  # fmt: skip
    for name, path in files.items():
        if path:
            _digest.cache_clear()
            size = Path(path).stat().st_size
            out["hash_ms"][name] = {"bytes": size, "ms": _mean_ms(lambda p=path: file_identity(p), 1)}
    journal = runner.folder / "overhead.journal"
    lock_times = []
    for _ in range(50):
        started = time.perf_counter()
        with ask_lock(journal):
            pass
        lock_times.append(time.perf_counter() - started)
    out["ask_lock_ms"] = round(sum(lock_times) / len(lock_times) * 1000, 3)
    space = parse_space(["++a=tag(ordered, choice(1, 2, 4, 8, 16, 32))", "++b=tag(ordered, choice(1, 2, 4, 8))",
                         "++c=range(1, 10)"])  # fmt: skip
    study = optuna.create_study(study_name="overhead", storage=open_storage(journal), direction="maximize",
                                sampler=optuna.samplers.RandomSampler(seed=0))  # fmt: skip
    rng = random.Random(0)
    for _ in range(200):
        trial, _ = ask_new(study, space, rng)
        if trial is not None:
            study.tell(trial, rng.random())
    with LeaseKeeper(study._storage, 120) as keeper:
        round_times = []
        for _ in range(20):
            started = time.perf_counter()
            with ask_lock(journal):
                reap_lost(study, 120)
                requeue_lost(study)
                trial, _ = ask_new(study, space, rng)
                if trial is not None:
                    keeper.hold(trial._trial_id)
            round_times.append(time.perf_counter() - started)
            if trial is not None:
                keeper.release(trial._trial_id)
                study.tell(trial, rng.random())
    out["ask_round_ms"] = round(sum(round_times) / len(round_times) * 1000, 1)
    out["trials"] = len(study.trials)
    return out


RUNS = {"fixed": fixed, "narrow": narrow, "kill": kill, "two": two, "journal": journal_faults, "overhead": overhead}


def _load() -> float:
    return os.getloadavg()[0]


def table(results: dict[str, Any]) -> str:
    """The figures, one line per scenario (Markdown)."""
    rows = ["| scenario | what came of it |", "|---|---|"]
    r = results["scenarios"]
    if "fixed" in r:
        f = r["fixed"]
        rows.append(
            f"| fixed keys after a search | exit {f['exit']}, {f['jobs']} job(s) run, best "
            f"{(f['best'] or {}).get('value')} measured by its own jobs: {f['best_measured_by_it']} |"
        )
    if "narrow" in r:
        n = r["narrow"]
        crash = f", {n['error']}" if n["traceback"] else ""
        rows.append(
            f"| a narrower space on the old journal | exit {n['exit']}{crash}, {n['jobs']} job(s) "
            f"(numAnalysisThreads {', '.join(map(str, n['threads_run'])) or '-'}), best "
            f"{(n['best'] or {}).get('params')} measured by its own jobs: {n['best_measured_by_it']} |"
        )
    if "kill" in r:
        k = r["kill"]
        rows.append(
            f"| SIGKILL during the start's job, rerun | exit {k['exit']}, killed trial measured on the "
            f"rerun: {k['killed_measured_on_rerun']}, trials left RUNNING: {k['left_running']}, configs "
            f"measured: {k['configs_measured']} |"
        )
    if "two" in r:
        t = r["two"]
        rows.append(
            f"| two sweepers at once | exits {t['exits']}, {t['jobs']} job(s) for {t['configs']} config(s) "
            f"(at most {t['most_jobs_of_one_config']} of one), failed values passed on: "
            f"{t['failed_values_passed_on']}, same best: {t['same_best']}, best a failed job: "
            f"{t['best_is_a_failed_job']} |"
        )
    if "journal" in r:
        for name, j in r["journal"]["cases"].items():
            rows.append(
                f"| {name} journal | exit {j['exit']}, traceback: {j['traceback']}, jobs {j['jobs']}: "
                f"`{j['message'][:150]}` |"
            )
    if "overhead" in r:
        o = r["overhead"]
        hashed = "; ".join(
            f"{name} ({v['bytes'] / 2**20:.1f} MiB) {v['ms']:.0f} ms" for name, v in o["hash_ms"].items()
        )
        rows.append(
            f"| overhead | condition: sha256 of {hashed}; ask lock taken and let go: {o['ask_lock_ms']:.2f} "
            f"ms; an ask round (reap, requeue, ask, lease) on a study of {o['trials']} trials: "
            f"{o['ask_round_ms']:.0f} ms |"
        )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.search_faults", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout whose `python -m kgbench` runs")
    parser.add_argument("--only", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--report", action="store_true", help="print the saved table again")
    parser.add_argument(
        "--recount", action="store_true", help="count the two sweepers' figures again from the saved runs"
    )
    args = parser.parse_args(argv)
    path = args.out / "results.json"
    if args.report:
        print(table(json.loads(path.read_text())))
        return 0
    results: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {"scenarios": {}}
    if args.recount:
        recount_two(args.out.resolve(), args.tree.resolve(), results)
        path.write_text(json.dumps(results, indent=1, default=str))
        print(table(results))
        return 0
    results.update(tree=str(args.tree.resolve()), date=datetime.now(UTC).isoformat(timespec="seconds"))
    for name in args.only:
        started, load_before = time.monotonic(), _load()
        outcome = RUNS[name](Runner(args.tree.resolve(), (args.out / name).resolve()))
        outcome.update(seconds=round(time.monotonic() - started, 1), load_before=load_before, load_after=_load())
        results["scenarios"][name] = outcome
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=1, default=str))
        print(f"{name}: done in {outcome['seconds']} s (load average {load_before:.1f} -> {_load():.1f})", flush=True)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
