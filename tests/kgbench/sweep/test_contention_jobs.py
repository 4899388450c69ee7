"""Contention, end to end on the simulated engine: a job beside busy loops is flagged, re-measured, kept but marked,
counted on the sweep's last line and set aside by promote; a quiet job is not flagged; two jobs sharing one
simulated device flag each other. Behaviour only: which tags and lines appear, never how fast anything ran."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from benchmarks.contention import busy_loops
from kgbench.decide import promote
from kgbench.track.contention import ContentionSettings
from kgbench.track.sampling.host import HostSampler
from tests.helpers.kgbench_runs import client_for, run_kgbench, runs_by_role
from tests.helpers.mlflow_store import seeded_uri

pytestmark = pytest.mark.slow

CHECK = ["contention.check=true", "contention.settle_s=0"]
SMOKE = ["backend=sim", "load=smoke", "load.concurrency=[4]"]
SIM = {"KGSERVE_SIM_SPEED": "20"}


def test_a_job_beside_busy_loops_is_flagged_remeasured_kept_marked_and_set_aside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with busy_loops(os.cpu_count() or 2, 0, 240, {}):  # every core spun at once: the host saturated by others
        code, out = run_kgbench(tmp_path, "-m", *SMOKE, *CHECK, "contention.remeasure=1", env=SIM)
    assert code == 0, out
    (run,) = runs_by_role(client_for(tmp_path), "job")
    tags, metrics = run.data.tags, run.data.metrics
    assert run.info.status == "FINISHED"
    assert tags["kgbench.contended"] == "true"
    assert "other processes used" in tags["kgbench.contention"] and "window(s) contended" in tags["kgbench.contention"]
    history = tags["kgbench.contention_attempts"]
    assert history.startswith("measurement 1: contended (") and "measurement 2: contended (" in history
    assert metrics["contention_remeasures"] == 1 and metrics["contended_windows"] >= 1
    assert metrics["contention_other_cpu_cores_max"] >= 0.25
    assert "re-measuring (1 of 1)" in out and "kept but marked contended" in out
    assert "CONTENDED" in out  # the sweep table's flags
    last = "kgbench: contended jobs: 1 of 1 (0 clean when re-measured; 1 still contended, kept but marked, "
    assert any(line.startswith(last) for line in out.splitlines()), out  # (run_kgbench: stdout, then stderr)

    # promote into the sweep's own (scratch) runtime, written nowhere: the only run is set aside, saying why
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    capsys.readouterr()
    assert promote.main(["--tracking-uri", tracking, "--allow-simulated", "--dry-run", "--explain"]) == 1
    said = capsys.readouterr()
    shown = said.out + said.err
    assert f"set aside {run.info.run_id}" in shown and "contended (" in shown, shown
    assert "satisfies the rule" in shown and "nothing promoted" in shown, shown


def _host_is_quiet() -> bool:
    with HostSampler(interval_s=0.25) as host:
        time.sleep(3.0)
    figures = host.metrics()
    limit = ContentionSettings().other_cores_limit(figures.get("host_cores", 1.0))
    return figures.get("other_cpu_cores", 0.0) < limit / 2 and psutil.getloadavg()[0] < 0.8 * (os.cpu_count() or 1)


@pytest.mark.alone  # its premise: no other test's processes on the host
def test_a_quiet_job_is_not_flagged(tmp_path: Path) -> None:
    if not _host_is_quiet():
        pytest.skip("this machine is not quiet now (other processes use its cores): the premise does not hold")
    code, out = run_kgbench(tmp_path, "-m", *SMOKE, *CHECK, env=SIM)
    assert code == 0, out
    (run,) = runs_by_role(client_for(tmp_path), "job")
    assert run.data.tags["kgbench.contended"] == "false", run.data.tags["kgbench.contention"]
    assert run.data.tags["kgbench.contention"].startswith("clean: ")
    assert run.data.metrics["contention_remeasures"] == 0
    assert "kgbench: contended jobs: 0 of 1" in out.splitlines()


def _kgbench(tmp: Path, device: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "MLFLOW_TRACKING_URI": seeded_uri(tmp / "mlflow.db"), "KGSERVE_SIM_DEVICE": device, **SIM}
    argv = [sys.executable, "-m", "kgbench", *SMOKE, *CHECK, "contention.remeasure=0", *args,
            f"hydra.run.dir={tmp / 'run'}"]  # fmt: skip
    return subprocess.Popen(argv, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_two_jobs_on_one_simulated_device_flag_each_other(tmp_path: Path) -> None:
    """Started together, each measuring for ~30 s: whatever their start-up takes, their windows overlap, and each
    sees the other's sim on the device it uses."""
    device = f"kgbench-shared-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    folders = [tmp_path / "first", tmp_path / "second"]
    long = ["load.window_s=1", "load.min_windows=30", "load.max_windows=30"]
    procs = []
    for folder in folders:
        folder.mkdir()
        procs.append(_kgbench(folder, device, *long))
    try:
        outputs = [proc.communicate(timeout=400)[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert all(proc.returncode == 0 for proc in procs), "\n".join(out[-3000:] for out in outputs)
    for folder in folders:
        (run,) = runs_by_role(client_for(folder), "job")
        assert run.data.tags["kgbench.contended"] == "true", run.data.tags["kgbench.contention"]
        assert "other process(es) on the job's device (pid " in run.data.tags["kgbench.contention"]
        assert run.data.metrics["contention_device_processes_max"] >= 1
