"""`python -m benchmarks.store_faults --out DIR`: issue 45's full disks, damaged stores and unreachable tracking server,
each met as a user meets it, with what came of it: exit status, seconds, a traceback or not, the lines that say what
went wrong, and whether store and files still agree (runtime written while its run says not promoted, runs left
RUNNING, jobs recorded). On the simulated engine (KGSERVE_SIM_SPEED=20, load=smoke, contention check off).

    python -m benchmarks.store_faults --out bench-store-faults                 # this checkout
    python -m benchmarks.store_faults --out bench-base --tree /tmp/base-tree   # another checkout (e.g. main before)

Scenarios (``--only`` picks some); the full disks are real tmpfs mounts (root needed: without one they are skipped):

- truncated, overwritten: a real sweep's mlflow.db cut to a third / its header overwritten: promote --dry-run
  --explain, promote, report;
- text_metric: one run's req_per_s set to 'fast' in the store: promote --dry-run --explain, report;
- unreachable: a closed loopback port as the tracking URI: promote --dry-run --explain, report, a sweep;
- promote_full_store, promote_full_runtime: promote with the store's disk full / the runtime folder's disk full;
- sweep_full_store: a sweep on a store whose disk is full from the start;
- sweep_full_midway: a two-job sweep whose store's disk fills once its first job's run is FINISHED;
- multirun_full: a sweep whose multirun folder's disk is full;
- two_fresh: two one-job sweeps started together on one fresh sqlite store.

DIR/results.json holds every figure and each command's output tail; the table is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mlflow.tracking import MlflowClient

from kgserve.paths import PROJECT_ROOT as REPO

__all__ = ["SCENARIOS", "main"]

SMOKE = ["-m", "backend=sim", "load=smoke", "load.concurrency=[4]"]
ENV = {"KGSERVE_SIM_SPEED": "20", "KGBENCH_CONTENTION_CHECK": "false", "PYTHONUNBUFFERED": "1"}
SAID = ("error:", "kgbench: cannot", "kgbench: the", "kgbench: run")  # the lines that say what went wrong
SCENARIOS = ("truncated", "overwritten", "text_metric", "unreachable", "promote_full_store", "promote_full_runtime",
             "sweep_full_store", "sweep_full_midway", "multirun_full", "two_fresh")  # fmt: skip


class Bench:
    def __init__(self, tree: Path, out: Path) -> None:
        self.tree, self.out = tree, out
        self._base: Path | None = None

    def env(self, uri: str, device: str) -> dict[str, str]:
        path = os.pathsep.join(filter(None, [str(self.tree), os.environ.get("PYTHONPATH")]))  # --tree's kgbench
        return {**os.environ, **ENV, "MLFLOW_TRACKING_URI": uri, "KGSERVE_SIM_DEVICE": f"store-faults-{device}",
                "PYTHONPATH": path}  # fmt: skip

    def command(self, argv: Sequence[str], uri: str, cwd: Path) -> dict[str, Any]:
        started = time.monotonic()
        done = subprocess.run([sys.executable, *argv], cwd=cwd, env=self.env(uri, cwd.name), capture_output=True,
                              text=True, timeout=900)  # fmt: skip
        out = done.stdout + done.stderr
        said = [line for line in out.splitlines() if line.startswith(SAID)]
        tail = "\n".join(out.splitlines()[-8:])
        return {"argv": " ".join(argv[1:4]), "exit": done.returncode, "s": round(time.monotonic() - started, 1),
                "traceback": "Traceback" in out, "said": said[-3:], "tail": tail}  # fmt: skip

    def sweep(self, folder: Path, uri: str, *extra: str) -> dict[str, Any]:
        argv = ["-m", "kgbench", *SMOKE, *extra, f"hydra.sweep.dir={folder / 'multirun'}"]
        return self.command(argv, uri, folder)

    def base(self) -> Path:
        """A real two-job sweep's store, made once and copied for each scenario that damages one."""
        if self._base is None:
            folder = self.out / "base"
            folder.mkdir(parents=True, exist_ok=True)
            self.sweep(folder, f"sqlite:///{folder / 'mlflow.db'}", "nnMaxBatchSize=8,32")
            self._base = folder / "mlflow.db"
        return self._base

    def store_copy(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copyfile(self.base(), folder / "mlflow.db"))

    def promote(self, uri: str, cwd: Path, *args: str) -> dict[str, Any]:
        return self.command(["-m", "kgbench.promote", "--tracking-uri", uri, *args], uri, cwd)

    def report(self, uri: str, cwd: Path) -> dict[str, Any]:
        return self.command(["-m", "kgbench.report", "--tracking-uri", uri, "--no-log", "--out", "report"], uri, cwd)


def _runs(uri: str) -> list[Any]:
    client = MlflowClient(tracking_uri=uri)
    ids = [e.experiment_id for e in client.search_experiments() if e.name in ("kgbench", "kgbench-sim")]
    return client.search_runs(ids, "", max_results=500) if ids else []


def _states(uri: str) -> dict[str, Any]:
    runs = _runs(uri)
    return {"running": sum(r.info.status == "RUNNING" for r in runs),
            "jobs": sorted(r.info.status for r in runs if r.data.tags.get("kgbench.role") == "job"),
            "promoted": sum(r.data.tags.get("promoted") not in (None, "false") for r in runs)}  # fmt: skip


class Tmpfs:
    """A real tmpfs at `path` (unmounted on exit); `ok` False where none can be mounted."""

    def __init__(self, path: Path, size_kib: int = 4096) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path, self.size_kib = path, size_kib
        self.ok = False

    def __enter__(self) -> Tmpfs:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size_kib}k", "tmpfs", str(self.path)],
                              capture_output=True)  # fmt: skip
        self.ok = done.returncode == 0
        return self

    def fill(self) -> None:
        for name, chunk in ((".filler", 65536), (".filler-tail", 1)):
            try:
                with open(self.path / name, "wb") as handle:
                    while True:
                        handle.write(b"\0" * chunk)
                        handle.flush()
            except OSError:
                pass

    def __exit__(self, *exc: object) -> None:
        if self.ok:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)


def _damaged(bench: Bench, folder: Path, damage: Callable[[Path], None], promote: bool = True) -> dict[str, Any]:
    db = bench.store_copy(folder)
    damage(db)
    uri = f"sqlite:///{db}"
    result = {"explain": bench.promote(uri, folder, "--dry-run", "--explain", "--allow-simulated")}
    if promote:
        result["promote"] = bench.promote(uri, folder, "--allow-simulated", "--runtime-dir", "rt")
    return {**result, "report": bench.report(uri, folder), "runtime_written": (folder / "rt").exists()}


def truncated(bench: Bench, folder: Path) -> dict[str, Any]:
    def cut(db: Path) -> None:
        with open(db, "r+b") as handle:
            handle.truncate(db.stat().st_size // 3)

    return _damaged(bench, folder, cut)


def overwritten(bench: Bench, folder: Path) -> dict[str, Any]:
    def header(db: Path) -> None:
        with open(db, "r+b") as handle:
            handle.write(b"this is no longer an sqlite file")

    return _damaged(bench, folder, header)


def text_metric(bench: Bench, folder: Path) -> dict[str, Any]:
    def junk(db: Path) -> None:
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE latest_metrics SET value = 'fast' WHERE key = 'req_per_s' AND run_uuid = "
                         "(SELECT run_uuid FROM latest_metrics WHERE key = 'req_per_s' LIMIT 1)")  # fmt: skip

    result = _damaged(bench, folder, junk, promote=False)
    said = result["explain"]["said"]
    result["skipped_said"] = any("skipped: its metric req_per_s holds 'fast'" in line for line in said)
    return result


def unreachable(bench: Bench, folder: Path) -> dict[str, Any]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    uri = f"http://127.0.0.1:{port}"
    folder.mkdir(parents=True, exist_ok=True)
    return {"explain": bench.promote(uri, folder, "--dry-run", "--explain"), "report": bench.report(uri, folder),
            "sweep": bench.sweep(folder, uri)}  # fmt: skip


def promote_full_store(bench: Bench, folder: Path) -> dict[str, Any]:
    with Tmpfs(folder / "disk") as disk:
        if not disk.ok:
            return {"skipped": "no tmpfs can be mounted here"}
        uri = f"sqlite:///{bench.store_copy(disk.path)}"
        disk.fill()
        result = {"promote": bench.promote(uri, folder, "--allow-simulated", "--runtime-dir", "rt")}
        return {**result, "runtime_written": (folder / "rt" / "config.yaml").exists(), **_states(uri)}


def promote_full_runtime(bench: Bench, folder: Path) -> dict[str, Any]:
    uri = f"sqlite:///{bench.store_copy(folder / 'store')}"
    with Tmpfs(folder / "rt", 256) as disk:
        if not disk.ok:
            return {"skipped": "no tmpfs can be mounted here"}
        disk.fill()
        result = {"promote": bench.promote(uri, folder, "--allow-simulated", "--runtime-dir", str(disk.path))}
        return {**result, "runtime_written": (disk.path / "config.yaml").exists(), **_states(uri)}


def sweep_full_store(bench: Bench, folder: Path) -> dict[str, Any]:
    with Tmpfs(folder / "disk") as disk:
        if not disk.ok:
            return {"skipped": "no tmpfs can be mounted here"}
        db = shutil.copyfile(bench.base(), disk.path / "mlflow.db")
        disk.fill()
        uri = f"sqlite:///{db}"
        return {"sweep": bench.sweep(folder, uri), **_states(uri)}


def sweep_full_midway(bench: Bench, folder: Path) -> dict[str, Any]:
    """The store's disk fills once the first job's run is FINISHED (read from the store while the sweep runs)."""
    with Tmpfs(folder / "disk", 8192) as disk:
        if not disk.ok:
            return {"skipped": "no tmpfs can be mounted here"}
        uri = f"sqlite:///{disk.path / 'mlflow.db'}"
        shutil.copyfile(bench.base(), disk.path / "mlflow.db")
        before = {r.info.run_id for r in _runs(uri)}
        filled: list[float] = []

        def watch() -> None:
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                if any(r.info.run_id not in before and r.info.status == "FINISHED" for r in _runs(uri)):
                    disk.fill()
                    filled.append(time.monotonic())
                    return
                time.sleep(0.5)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        result = bench.sweep(folder, uri, "nnMaxBatchSize=8,32")
        watcher.join(timeout=5)
        for name in (".filler", ".filler-tail"):  # room to read the store back
            (disk.path / name).unlink(missing_ok=True)
        states = _states(uri)
        states["jobs"] = sorted(r.info.status for r in _runs(uri) if r.info.run_id not in before
                                and r.data.tags.get("kgbench.role") == "job")  # fmt: skip
        return {"sweep": result, "filled": bool(filled), **states}


def multirun_full(bench: Bench, folder: Path) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{shutil.copyfile(bench.base(), folder / 'mlflow.db')}"
    before = {r.info.run_id for r in _runs(uri)}
    with Tmpfs(folder / "multirun", 1024) as disk:
        if not disk.ok:
            return {"skipped": "no tmpfs can be mounted here"}
        disk.fill()
        result = bench.sweep(folder, uri)
    runs = [r for r in _runs(uri) if r.info.run_id not in before]
    return {"sweep": result, "running": sum(r.info.status == "RUNNING" for r in runs),
            "statuses": sorted(f"{r.data.tags.get('kgbench.role')}:{r.info.status}" for r in runs)}  # fmt: skip


def two_fresh(bench: Bench, folder: Path) -> dict[str, Any]:
    (folder / "shared").mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{folder / 'shared' / 'mlflow.db'}"
    results: dict[str, dict[str, Any]] = {}

    def one(name: str) -> None:
        (folder / name).mkdir(exist_ok=True)
        results[name] = bench.sweep(folder / name, uri)

    threads = [threading.Thread(target=one, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=900)
    return {**results, **_states(uri)}


def _row(name: str, result: dict[str, Any]) -> str:
    if "skipped" in result:
        return f"{name:22s} skipped: {result['skipped']}"
    commands = {k: v for k, v in result.items() if isinstance(v, dict)}
    cells = [f"{k} exit {v['exit']} {v['s']:.0f}s{' TRACEBACK' if v['traceback'] else ''}" for k, v in commands.items()]
    rest = {k: v for k, v in result.items() if not isinstance(v, dict)}
    said = next((v["said"][-1] for v in commands.values() if v["said"]), "")
    return f"{name:22s} {'; '.join(cells)}; {rest}\n{'':22s} said: {said[:200]}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout whose kgbench runs (default: this)")
    parser.add_argument("--only", nargs="*", choices=SCENARIOS, default=list(SCENARIOS))
    args = parser.parse_args(argv)
    out = args.out.resolve()
    bench = Bench(args.tree.resolve(), out)
    results: dict[str, Any] = {}
    for name in args.only:
        results[name] = globals()[name](bench, out / name)
        print(_row(name, results[name]), flush=True)
        (out / "results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
