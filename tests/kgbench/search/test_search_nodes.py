"""Two sweepers of one study on two "nodes" (issue 36): each `python -m kgbench -m ... hparams_search=optuna` runs
as a PBS job (stub qsub: its own session and PBS's bare environment), the journal on the "shared filesystem" (this
tmp_path) and one real `mlflow server` for both, as docs/multi-node.md sets a cluster up. Every config is measured
once between them, a failed job's value is passed on to neither, and both report the same best."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from kgbench.search.attrs import FAILED_ATTR, REUSED_ATTR
from tests.conftest import REPO
from tests.helpers.kgbench_runs import search_study
from tests.kgbench.sweep.conftest import PBSStub

EXPERIMENT = "search-nodes-test"


def _node_script(tmp_path: Path, args: list[str], name: str) -> Path:
    """What each node runs: the same search command, on the shared journal and the one MLflow server."""
    script = tmp_path / f"{name}.pbs"
    command = shlex.join([sys.executable, "-m", "kgbench", *args, f"hydra.sweep.dir={tmp_path / name}"])
    script.write_text(
        "#!/usr/bin/env bash\n"
        f"cd {shlex.quote(str(REPO))}\n"
        f"export PYTHONPATH={shlex.quote(str(REPO))} PYTHONUNBUFFERED=1 KGSERVE_SIM_SPEED=20 "
        "KGBENCH_CONTENTION_CHECK=false\n"
        f"export KGSERVE_SIM_DEVICE=kgbench-test-{tmp_path.name}-$PBS_JOBID\n"
        f"exec {command}\n"
    )
    return script


def _best_line(log: str) -> str:
    (line,) = [line.split("]", 1)[1] for line in log.splitlines() if "] Best trial " in line]
    return line.split(" (", 1)[0]


@pytest.mark.slow
@pytest.mark.timeout(900)  # an mlflow server and two sweeps on a loaded 2-core machine
def test_two_sweepers_on_two_nodes_measure_each_config_once_and_agree_on_the_best(
    tmp_path: Path, mlflow_server: str, pbs_stub: PBSStub
) -> None:
    journal = tmp_path / "shared" / "study.journal"
    args = ["-m", "backend=sim", "load=smoke", "load.concurrency=[4]", "hparams_search=optuna",
            "hydra.sweeper.params=null", "hydra.sweeper.sampler.seed=0",
            "numAnalysisThreads=tag(ordered, choice(2, 4))", "engines=choice(0, 1)",  # engines=0: a failed job
            f"hydra.sweeper.journal={journal}", "hydra.sweeper.n_trials=4",
            f"mlflow.tracking_uri={mlflow_server}", f"mlflow.experiment={EXPERIMENT}"]  # fmt: skip
    for node in ("node-a", "node-b"):
        assert pbs_stub.run("qsub", str(_node_script(tmp_path, args, node))).returncode == 0
    deadline = time.monotonic() + 600
    while pbs_stub.alive_jobs() and time.monotonic() < deadline:
        time.sleep(1)
    logs = [(pbs_stub.dir / f"{job}.log").read_text() for job in pbs_stub.job_ids()]
    assert not pbs_stub.alive_jobs(), "\n".join(log[-3000:] for log in logs)
    for log in logs:
        assert "Traceback" not in log and "Best trial " in log, log[-4000:]
    trials = search_study(journal, "kgbench").trials
    ran = [t for t in trials if REUSED_ATTR not in t.user_attrs]
    assert len(ran) == 4 and len({str(t.params) for t in ran}) == 4  # each config once, between the two nodes
    failed = [t for t in ran if t.user_attrs.get(FAILED_ATTR)]
    assert sorted(t.params["engines"] for t in failed) == [0, 0]
    told = {t.user_attrs[REUSED_ATTR]: t for t in trials if REUSED_ATTR in t.user_attrs}
    assert all(told[f.number].value is None for f in failed if f.number in told)  # never passed on as a value
    assert _best_line(logs[0]) == _best_line(logs[1]) and "engines': 1" in _best_line(logs[0])
    client = MlflowClient(tracking_uri=mlflow_server)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    jobs = [r for r in runs if r.data.tags.get("kgbench.role") == "job"]
    assert len(jobs) == 4 and {r.data.tags["pbs_job_id"] for r in jobs} <= {f"{j}.stub" for j in pbs_stub.job_ids()}
