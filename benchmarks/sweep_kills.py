"""`python -m benchmarks.sweep_kills --out DIR`: issue 45's kills of a sweep and of its job's processes, each done as
a user (or the machine) does it to `python -m kgbench -m backend=sim ...` mid-job, with what came of it in figures:
seconds from the kill to the sweep's exit, its exit status, its kgserve and engine processes still alive 5 s after
that (then killed here), and its MLflow runs' statuses and reasons.

    python -m benchmarks.sweep_kills --out bench-sweep-kills                  # this checkout
    python -m benchmarks.sweep_kills --out bench-base --tree /tmp/base-tree   # another checkout's kgbench

Scenarios (``--only`` picks some), each on a fresh store, killed ~3 s into its job's first level:

- sigterm: `kill PID` of the sweep;
- ctrl-c: SIGINT to the sweep's process group (a terminal's Ctrl-C reaches kgserve too);
- sigkill: `kill -9 PID` of the sweep, then `python -m kgbench.report`: are its runs marked;
- engine: the job's engine SIGKILLed (kgserve restarts it), the job left to end: its run's faults, status, and
  what `promote --dry-run --explain --allow-simulated` says;
- kgserve: the job's kgserve SIGKILLed, the job left to end: its run's status and reason.

DIR/results.json holds every figure and each run's output tail; the table is printed. Timings are taken on whatever
machine runs it (two busy shared cores for the figures in docs/sweeps.md): read them as bounds, not speeds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psutil
from mlflow.tracking import MlflowClient

from kgserve.paths import PROJECT_ROOT as REPO

__all__ = ["SCENARIOS", "main", "table"]

SCENARIOS = ("sigterm", "ctrl-c", "sigkill", "engine", "kgserve")
ENDLESS = ["load=smoke", "load.concurrency=[2]", "load.tolerance=0.0", "load.max_windows=200"]
ENDING = ["load=smoke", "load.concurrency=[2,4]"]
LISTENING = re.compile(r"kgserve listening on (http://\S+?):(\d+)\b")
END_BOUND_S = 120.0


def _env(folder: Path) -> dict[str, str]:
    return {
        **os.environ,
        "MLFLOW_TRACKING_URI": f"sqlite:///{folder / 'mlflow.db'}",
        "KGSERVE_SIM_DEVICE": f"sweep-kills-{os.getpid()}-{folder.name}",
        "PYTHONUNBUFFERED": "1",
    }


def _ready_url(folder: Path) -> str | None:
    for log in (folder / "multirun").glob("*/kgserve_stderr.log"):
        if match := LISTENING.search(log.read_text(errors="replace")):
            url = f"{match.group(1)}:{match.group(2)}"
            with contextlib.suppress(OSError), urllib.request.urlopen(url + "/readyz", timeout=2) as response:
                if response.status == 200:
                    return url
    return None


def _alive(procs: Sequence[psutil.Process]) -> list[psutil.Process]:
    out = []
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
    return out


def _runs(folder: Path) -> list[dict[str, str]]:
    client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
    ids = [e.experiment_id for e in client.search_experiments()]
    return [
        {
            "role": run.data.tags.get("kgbench.role", ""),
            "status": run.info.status,
            "reason": run.data.tags.get("kgbench.failure_reason", ""),
            "faults": run.data.tags.get("kgbench.faults", ""),
        }
        for run in client.search_runs(ids, max_results=100)
    ]


def _kgbench(tree: Path, folder: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=tree, env=_env(folder), capture_output=True, text=True, timeout=timeout
    )


def run_scenario(name: str, tree: Path, folder: Path) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    dirs = [f"hydra.sweep.dir={folder / 'multirun'}", f"hydra.run.dir={folder / 'run'}"]
    load = ENDING if name in ("engine", "kgserve") else ENDLESS
    log = (folder / "sweep.log").open("wb")
    sweep = subprocess.Popen(
        [sys.executable, "-m", "kgbench", "-m", "backend=sim", *load, *dirs],
        cwd=tree,
        env=_env(folder),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    result: dict[str, Any] = {"scenario": name}
    try:
        deadline = time.monotonic() + 300
        while _ready_url(folder) is None and sweep.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3.0)  # into the first level's windows
        server = next((c for c in psutil.Process(sweep.pid).children() if "kgserve" in " ".join(c.cmdline())), None)
        if server is None:
            return {**result, "error": "no kgserve found under the sweep"}
        tree_procs = [server, *server.children(recursive=True)]
        kills: dict[str, Callable[[], None]] = {
            "sigterm": lambda: sweep.send_signal(signal.SIGTERM),
            "ctrl-c": lambda: os.killpg(sweep.pid, signal.SIGINT),
            "sigkill": lambda: sweep.send_signal(signal.SIGKILL),
            "engine": lambda: tree_procs[-1].kill(),
            "kgserve": lambda: server.kill(),
        }
        killed = time.monotonic()
        kills[name]()
        try:
            result["exit_status"] = sweep.wait(timeout=END_BOUND_S)
            result["exit_s"] = round(time.monotonic() - killed, 1)
        except subprocess.TimeoutExpired:
            result["exit_status"], result["exit_s"] = None, f"> {END_BOUND_S:g}"
        time.sleep(5.0)
        left = _alive(tree_procs)
        result["left_5s_after"] = len(left)
        for proc in left:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        if name == "sigkill":
            report = _kgbench(tree, folder, "kgbench.report", "--no-log", "--out", str(folder / "report"))
            result["report_marked"] = (report.stdout + report.stderr).count("KILLED: its process")
        if name == "engine":
            promote = _kgbench(tree, folder, "kgbench.promote", "--dry-run", "--explain", "--allow-simulated")
            text = promote.stdout + promote.stderr
            result["promote_exit"] = promote.returncode
            result["promote_winner"] = "WINNER" in text
        result["runs"] = _runs(folder)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(sweep.pid, signal.SIGKILL)
        sweep.wait(timeout=30)
        log.close()
        result["tail"] = (folder / "sweep.log").read_text(errors="replace")[-2000:]
    return result


def table(results: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| scenario | exit status | s to exit | kgserve/engine left 5 s after | runs (status: reason or faults) "
        "| after |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        runs = "; ".join(
            f"{x['role']} {x['status']}"
            + (f": {(x['faults'] or x['reason'])[:90]}" if x["faults"] or x["reason"] else "")
            for x in r.get("runs", [])
        )
        after = ""
        if "report_marked" in r:
            after = f"report marked {r['report_marked']} run(s)"
        if "promote_exit" in r:
            after = f"promote exit {r['promote_exit']}, winner: {'yes' if r['promote_winner'] else 'no'}"
        status = r.get("exit_status", r.get("error", "-"))
        lines.append(f"| {r['scenario']} | {status} | {r.get('exit_s', '-')} | {r.get('left_5s_after', '-')} | "
                     f"{runs or '-'} | {after or '-'} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sweep_kills", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout whose kgbench runs (default: this one)")
    parser.add_argument("--only", nargs="*", choices=SCENARIOS, default=list(SCENARIOS))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results = [run_scenario(name, args.tree.resolve(), args.out.resolve() / name) for name in args.only]
    (args.out / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
