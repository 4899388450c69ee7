"""Full disks, damaged stores and a tracking server nobody answers, for real (issue 45, item 3): each gives one line
naming the store (or the folder) and the problem, a non-zero exit and no traceback, from a sweep, promote (with
--dry-run --explain too) and report; the runtime is never written while its run says it is not promoted, and no run is
left RUNNING. The stores are copies of a real sweep's (two_job_sim_sweep), damaged with real bytes; the full disk is a
real tmpfs where the test can mount one (tests/helpers/full_disk.py says what it injects elsewhere)."""

from __future__ import annotations

import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from kgbench.track import store_errors
from tests.helpers.full_disk import full_disk
from tests.helpers.kgbench_runs import run_kgbench, runs_by_role
from tests.helpers.mlflow_store import seed_store
from tests.kgbench.sweep.conftest import SimSweep

SMOKE = ["-m", "backend=sim", "load=smoke", "load.concurrency=[4]"]
FAST = {"KGSERVE_SIM_SPEED": "20"}


def _cli(module: str, *args: str, cwd: Path, preexec: Callable[[], None] | None = None) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,  # generous: the answer comes in seconds, on two busy cores too
        preexec_fn=preexec,
    )
    return done.returncode, done.stdout + done.stderr


def _one_error(out: str, *needles: str) -> str:
    """The output's one `error:` line, which names every needle; no traceback anywhere."""
    assert "Traceback" not in out, out
    lines = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, out
    assert all(needle in lines[0] for needle in needles), out
    return lines[0]


def _store_copy(sweep: SimSweep, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copyfile(sweep.folder / "mlflow.db", folder / "mlflow.db"))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again once the socket is: nobody listens there


@pytest.mark.parametrize(
    ("damage", "problem"),
    [("truncate", "database disk image is malformed"), ("header", "file is not a database")],
)
def test_a_damaged_store_is_one_line_from_promote_and_report(
    two_job_sim_sweep: SimSweep, tmp_path: Path, damage: str, problem: str
) -> None:
    db = _store_copy(two_job_sim_sweep, tmp_path)
    if damage == "truncate":
        with open(db, "r+b") as handle:
            handle.truncate(db.stat().st_size // 3)
    else:
        with open(db, "r+b") as handle:
            handle.write(b"this is no longer an sqlite file")
    uri = f"sqlite:///{db}"
    explain = ("--dry-run", "--explain", "--allow-simulated")
    args = explain if damage == "truncate" else ("--allow-simulated", "--runtime-dir", "rt")
    code, out = _cli("kgbench.promote", "--tracking-uri", uri, *args, cwd=tmp_path)
    assert code == 1
    _one_error(out, str(db), problem)
    code, out = _cli("kgbench.report", "--tracking-uri", uri, "--no-log", "--out", "report", cwd=tmp_path)
    assert code == 1
    _one_error(out, str(db), problem)
    assert not (tmp_path / "rt").exists()


def test_a_metric_holding_text_skips_its_run_with_the_reason(two_job_sim_sweep: SimSweep, tmp_path: Path) -> None:
    db = _store_copy(two_job_sim_sweep, tmp_path)
    with sqlite3.connect(db) as conn:
        (bad,), (good,) = conn.execute("SELECT DISTINCT run_uuid FROM latest_metrics WHERE key = 'req_per_s'")
        conn.execute("UPDATE latest_metrics SET value = 'fast' WHERE key = 'req_per_s' AND run_uuid = ?", (bad,))
    uri = f"sqlite:///{db}"
    code, out = _cli("kgbench.promote", "--tracking-uri", uri, "--dry-run", "--explain", "--allow-simulated",
                     cwd=tmp_path)  # fmt: skip
    assert code == 0 and "Traceback" not in out, out
    assert f"run {bad} skipped: its metric req_per_s holds 'fast', not a number" in out
    assert good[:12] in out and bad[:12] not in out.split("skipped")[1]
    code, out = _cli("kgbench.report", "--tracking-uri", uri, "--no-log", "--out", "report", cwd=tmp_path)
    assert code == 0 and "Traceback" not in out and f"run {bad} skipped" in out, out


def test_a_missing_artifact_file_is_one_line_and_writes_nothing(two_job_sim_sweep: SimSweep, tmp_path: Path) -> None:
    """The store's artifacts copied and pointed at, then every katago.cfg deleted from the copy."""
    db = _store_copy(two_job_sim_sweep, tmp_path)
    shutil.copytree(two_job_sim_sweep.folder / "mlruns", tmp_path / "mlruns")
    old, new = str(two_job_sim_sweep.folder / "mlruns"), str(tmp_path / "mlruns")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET artifact_uri = replace(artifact_uri, ?, ?)", (old, new))
        conn.execute("UPDATE experiments SET artifact_location = replace(artifact_location, ?, ?)", (old, new))
    for cfg in (tmp_path / "mlruns").rglob("katago.cfg"):
        cfg.unlink()
    code, out = _cli("kgbench.promote", "--tracking-uri", f"sqlite:///{db}", "--allow-simulated", "--runtime-dir",
                     "rt", cwd=tmp_path)  # fmt: skip
    assert code == 1
    _one_error(out, "has no katago.cfg artifact to promote")
    assert not (tmp_path / "rt").exists()
    assert not [r for r in runs_by_role(MlflowClient(tracking_uri=f"sqlite:///{db}"), "job")
                if r.data.tags.get("promoted") not in (None, "false")]  # fmt: skip


def test_an_unreachable_server_answers_in_seconds_with_one_line(tmp_path: Path) -> None:
    uri = f"http://127.0.0.1:{_closed_port()}"
    for module, args in (
        ("kgbench.promote", ("--dry-run", "--explain")),
        ("kgbench.report", ("--no-log",)),
    ):
        code, out = _cli(module, "--tracking-uri", uri, *args, cwd=tmp_path)
        assert code == 1
        _one_error(out, uri, "unreachable")
    code, out = run_kgbench(tmp_path, *SMOKE, env={**FAST, "MLFLOW_TRACKING_URI": uri})
    assert code == 2 and "Traceback" not in out, out
    assert f"cannot open the sweep: MLflow store {uri}: unreachable" in out


def test_mlflows_retries_are_bounded_unless_the_user_set_them(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "5"}
    store_errors.bound_http(env)
    assert env["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "5"  # the user's own
    assert env["MLFLOW_HTTP_REQUEST_TIMEOUT"] == store_errors.HTTP_LIMITS["MLFLOW_HTTP_REQUEST_TIMEOUT"]


def test_promote_on_a_full_store_writes_no_runtime(two_job_sim_sweep: SimSweep, tmp_path: Path) -> None:
    with full_disk(tmp_path / "disk") as disk:
        db = _store_copy(two_job_sim_sweep, disk.path)
        disk.fill()
        uri = f"sqlite:///{db}"
        code, out = _cli("kgbench.promote", "--tracking-uri", uri, "--allow-simulated", "--runtime-dir", "rt",
                         cwd=tmp_path, preexec=disk.preexec())  # fmt: skip
        assert code == 1
        line = _one_error(out, "cannot tag run", str(db), "the runtime files restored, nothing promoted")
        assert ("the disk is full" if disk.real else "disk I/O error") in line
        assert not (tmp_path / "rt" / "config.yaml").exists() and not (tmp_path / "rt" / "katago_serving.cfg").exists()
        client = MlflowClient(tracking_uri=uri)
        assert not [r for r in runs_by_role(client, "job") if r.data.tags.get("promoted") not in (None, "false")]


def test_promote_into_a_full_runtime_folder_tags_nothing(two_job_sim_sweep: SimSweep, tmp_path: Path) -> None:
    db = _store_copy(two_job_sim_sweep, tmp_path / "store")
    with full_disk(tmp_path / "rt") as disk:
        disk.fill()
        code, out = _cli("kgbench.promote", "--tracking-uri", f"sqlite:///{db}", "--allow-simulated",
                         "--runtime-dir", str(disk.path), cwd=tmp_path, preexec=disk.preexec())  # fmt: skip
        assert code == 1
        _one_error(out, "cannot write", str(disk.path), "nothing changed")
        assert not (disk.path / "config.yaml").exists()
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    assert not [r for r in runs_by_role(client, "job") if r.data.tags.get("promoted") not in (None, "false")]


def test_a_sweep_on_a_full_store_is_refused_in_one_line(tmp_path: Path) -> None:
    with full_disk(tmp_path / "disk") as disk:
        if not disk.real:
            pytest.skip("no tmpfs can be mounted here: the sweep's full store is tested where one can be")
        db = seed_store(disk.path / "mlflow.db")  # an empty store, then no space left
        disk.fill()
        code, out = run_kgbench(tmp_path, *SMOKE, env={**FAST, "MLFLOW_TRACKING_URI": f"sqlite:///{db}"})
        assert code == 2 and "Traceback" not in out, out
        assert f"cannot open the sweep: MLflow store {db}: " in out
        assert "the disk is full" in out
        client = MlflowClient(tracking_uri=f"sqlite:///{db}")
        assert not client.search_runs([e.experiment_id for e in client.search_experiments()])


def test_a_full_multirun_folder_stops_the_sweep_in_one_line(tmp_path: Path) -> None:
    with full_disk(tmp_path / "multirun", size_kib=1024) as disk:
        if not disk.real:
            pytest.skip("no tmpfs can be mounted here: the full multirun folder is tested where one can be")
        disk.fill()
        code, out = run_kgbench(tmp_path, *SMOKE, env=FAST)
        assert code == 1 and "Traceback" not in out, out
        assert f"the sweep stopped: folder {disk.path}: " in out
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert [r.info.status for r in runs_by_role(client, "sweep")] == ["FAILED"]
    assert all(r.info.status != "RUNNING" for r in runs_by_role(client, "job"))


def test_two_sweeps_started_together_on_a_fresh_store_both_record_their_jobs(tmp_path: Path) -> None:
    db = tmp_path / "shared" / "mlflow.db"  # no store yet: both sweeps create and migrate it
    db.parent.mkdir()
    results: dict[str, tuple[int, str]] = {}

    def sweep(name: str) -> None:
        folder = tmp_path / name
        folder.mkdir()
        results[name] = run_kgbench(folder, *SMOKE, env={**FAST, "MLFLOW_TRACKING_URI": f"sqlite:///{db}"},
                                    seed_store=False)  # fmt: skip

    threads = [threading.Thread(target=sweep, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert {name: code for name, (code, _) in results.items()} == {"a": 0, "b": 0}, results
    jobs = runs_by_role(MlflowClient(tracking_uri=f"sqlite:///{db}"), "job")
    assert sorted(r.info.status for r in jobs) == ["FINISHED", "FINISHED"]
