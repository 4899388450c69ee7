"""hydra/launcher=pbs: a real Hydra multirun (`python -m kgbench -m ...` in a subprocess) whose jobs run as PBS jobs
(stub qsub/qdel running the dask-jobqueue job script here), a real dask scheduler and workers on loopback and a
real `mlflow server`. Three jobs in two batches (as a sweeper that launches batches, like Optuna's, does): one
job is deleted by PBS while it runs (as a preemption would) and is a FAILED run, the other two FINISHED, the
parent run summarises all three, the exit status is 0."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from kgbench.decide import promote, report
from kgbench.load.ledger import LEDGER_NAME
from kgbench.sweep.pbs.cluster import PBSOptions, cluster_kwargs, resource_spec
from kgserve.settings import load_settings
from tests.helpers.mlflow_store import seeded_uri

from .conftest import REPO, PBSStub, stop_tree

EXPERIMENT = "pbs-launcher-test"


def test_cluster_kwargs_from_the_runtime_config() -> None:
    cluster = load_settings().cluster
    assert cluster is not None
    kwargs = cluster_kwargs(cluster, PBSOptions(scheduler_host="127.0.0.1", interface="lo"))
    assert kwargs["resource_spec"] == resource_spec(cluster)
    assert f"ngpus={cluster.gpus}" in kwargs["resource_spec"] and f"ncpus={cluster.cpus}" in kwargs["resource_spec"]
    assert kwargs["walltime"] == cluster.sweep.walltime
    assert kwargs["cores"] == 1 and kwargs["processes"] == 1  # one job at a time per node
    assert kwargs["scheduler_options"]["host"] == "127.0.0.1"
    assert kwargs["interface"] == "lo"
    assert kwargs["job_script_prologue"][0] == f"cd {REPO}"


def test_cfg_hydra_shows_the_pbs_launcher() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kgbench", "--cfg", "hydra", "hydra/launcher=pbs"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "_target_: hydra_plugins.kgbench_pbs_launcher.PBSLauncher" in out
    assert "max_nodes: null" in out


def _runs(client: MlflowClient) -> list:  # type: ignore[type-arg]
    experiment = client.get_experiment_by_name(EXPERIMENT)
    return [] if experiment is None else client.search_runs([experiment.experiment_id])


@pytest.mark.slow
@pytest.mark.timeout(900)  # 2-5 min on a loaded 2-core machine: a dozen Python processes start
def test_sweep_on_pbs_nodes_survives_a_deleted_job(
    tmp_path: Path, mlflow_server: str, pbs_stub: PBSStub, capsys: pytest.CaptureFixture[str]
) -> None:
    client = MlflowClient(tracking_uri=mlflow_server)
    argv = [
        *(sys.executable, "-m", "kgbench", "-m", "hydra/launcher=pbs", "backend=sim", "load=smoke"),
        "load.warmup_s=0.5,120,0.6",  # the second job runs long enough to be deleted while it runs
        "hydra.sweeper.max_batch_size=2",  # the third job comes in a second batch, on the same cluster
        # a PBS job gets PBS's bare environment, not the suite's KGBENCH_CONTENTION_CHECK=false (tests/conftest.py): on
        # busy cores its jobs were flagged contended, waited for quiet and re-measured (minutes), and set aside
        "contention.check=false",
        f"mlflow.tracking_uri={mlflow_server}",
        f"mlflow.experiment={EXPERIMENT}",
        f"hydra.sweep.dir={tmp_path / 'multirun'}",
        "hydra.launcher.max_nodes=2",
        "hydra.launcher.scheduler_host=127.0.0.1",
        "hydra.launcher.interface=lo",
        "hydra.launcher.worker_extra_args=[--no-dashboard]",
        "hydra.launcher.poll_s=0.5",
    ]
    log = tmp_path / "sweep.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, cwd=REPO, env=pbs_stub.env, stdout=out, stderr=subprocess.STDOUT)
    try:
        victim = None
        deadline = time.monotonic() + 400
        while victim is None and proc.poll() is None and time.monotonic() < deadline:
            for run in _runs(client):
                tags = run.data.tags
                if "warmup_s=120" in tags.get("hydra_overrides", "") and run.info.status == "RUNNING":
                    victim = tags.get("pbs_job_id")
            time.sleep(0.2)
        assert victim, f"the long job never ran on a PBS job:\n{log.read_text()[-4000:]}"
        assert pbs_stub.run("qdel", victim).returncode == 0  # as PBS ends a deleted or preempted job
        assert proc.wait(timeout=400) == 0, log.read_text()[-4000:]
    finally:
        if proc.poll() is None:
            stop_tree(proc)
    output = log.read_text()

    # every PBS job asked for one GPU node's resources; the deleted one ran the long job
    scripts = [p.read_text() for p in sorted(pbs_stub.dir.glob("*.sh"))]
    assert scripts and all("#PBS -l select=1:ncpus=" in s and ":ngpus=" in s for s in scripts)
    assert all("dask_worker" in s and "--interface lo" in s for s in scripts)
    assert not pbs_stub.alive_jobs(), "the launcher left PBS jobs running"

    runs = _runs(client)
    parents = [r for r in runs if r.data.tags.get("kgbench.role") == "sweep"]
    jobs = [r for r in runs if r.data.tags.get("kgbench.role") == "job"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED", output[-4000:]
    assert len(jobs) == 3, output[-4000:]
    *done, lost = sorted(jobs, key=lambda r: "warmup_s=120" in r.data.tags["hydra_overrides"])
    assert "warmup_s=120" in lost.data.tags["hydra_overrides"]
    assert all(r.info.status == "FINISHED" and r.data.metrics.get("req_per_s", 0) > 0 for r in done)
    assert lost.info.status == "FAILED"
    assert "PBS job running it was lost" in lost.data.tags["kgbench.failure_reason"]
    for run in jobs:
        assert run.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        assert run.data.tags["pbs_job_id"].endswith(".stub")
    assert lost.data.tags["pbs_job_id"] == victim
    assert "kgbench sweep: 3 job(s)" in output

    # jobs on several nodes at once draw their positions from the sweep's one ledger, on the shared filesystem
    reservations = (tmp_path / "multirun" / LEDGER_NAME).read_text().splitlines()[1:]
    assert {"0", "2"} <= {line.rsplit("job=", 1)[1].split(":")[0] for line in reservations}
    sent = [set(pd.read_csv(path)["position"]) for path in (tmp_path / "multirun").glob("*/requests.csv")]
    assert len(sent) == 2 and not sent[0] & sent[1]
    assert all(r.data.tags["kgbench.positions"] == "sweep" and r.data.metrics["position_repeats"] == 0 for r in done)

    # promote and report read the sweep from the server, artifacts included, as from a local store
    common = ["--tracking-uri", mlflow_server, "--experiment", EXPERIMENT]
    rc = promote.main([*common, "--allow-simulated", "--dry-run", "--explain"])
    chosen, refused = capsys.readouterr()
    assert all(r.info.run_id[:12] in chosen for r in jobs), chosen  # every job's run read from the server
    if rc == 0:
        assert any(f"would promote run {r.info.run_id[:8]}: sim" in chosen for r in done), chosen
    else:
        # on a loaded 2-core machine both short smoke jobs can measure too noisily to count (CI did): the rule
        # refuses them by name and nothing else failed; the lost job is refused for its status
        assert rc == 1 and "satisfies the rule: " in refused, refused
        reasons = refused.split("satisfies the rule: ", 1)[1].split("; nothing promoted", 1)[0]
        reasons = re.sub(r" \(contended runs were set aside[^)]*\)$", "", reasons)
        assert all(r.startswith(("status FAILED", "unstable", "contended")) for r in reasons.split("; ")), refused
    assert report.main([*common, "--out", str(tmp_path / "report")]) == 0
    assert any((tmp_path / "report").iterdir())


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_refused_submission_fails_every_job_and_ends_the_sweep(tmp_path: Path, pbs_stub: PBSStub) -> None:
    store = seeded_uri(tmp_path / "mlflow.db")
    argv = [
        *(sys.executable, "-m", "kgbench", "-m", "hydra/launcher=pbs", "backend=sim", "load=smoke"),
        *("nnMaxBatchSize=8,16", f"mlflow.tracking_uri={store}", f"mlflow.experiment={EXPERIMENT}"),
        *(f"hydra.sweep.dir={tmp_path / 'multirun'}", "hydra.launcher.scheduler_host=127.0.0.1"),
        "hydra.launcher.poll_s=0.5",
    ]
    env = {**pbs_stub.env, "PBS_STUB_QSUB_ERROR": "Unknown resource: ngpus"}
    run = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    output = run.stdout + run.stderr
    assert run.returncode == 1, output[-4000:]  # no job succeeded
    assert "Unknown resource: ngpus" in output  # qsub's own message reaches the user
    runs = _runs(MlflowClient(tracking_uri=store))
    jobs = [r for r in runs if r.data.tags.get("kgbench.role") == "job"]
    parents = [r for r in runs if r.data.tags.get("kgbench.role") == "sweep"]
    assert len(jobs) == 2 and all(r.info.status == "FAILED" for r in jobs), output[-4000:]
    assert all("no PBS job could be submitted" in r.data.tags["kgbench.failure_reason"] for r in jobs)
    assert len(parents) == 1 and parents[0].info.status == "FAILED"
    assert not pbs_stub.job_ids()
