"""Positions never repeated across the jobs of a sweep: a real multirun on the simulated engine (each job its own
kgserve), the positions each job sent read from its requests.csv, and where they come from: `job_queries`."""

from __future__ import annotations

import itertools
from pathlib import Path

import pandas as pd
import pytest

from kgbench.decide import report
from kgbench.load.ledger import LEDGER_NAME
from kgbench.sweep.failure import JobFailure
from kgbench.sweep.positions import job_queries
from tests.helpers.kgbench_runs import client_for, runs_by_role

from .conftest import SimSweep


def test_a_single_run_draws_its_own_positions_a_sweep_job_from_the_ledger(tmp_path: Path) -> None:
    own, tags = job_queries(4, None, "0: defaults")
    assert tags == {"kgbench.positions": "run"} and not (tmp_path / LEDGER_NAME).exists()
    first, tags = job_queries(4, tmp_path, "0: a")
    second, _ = job_queries(9, tmp_path, "1: b")
    assert tags["kgbench.positions"] == "sweep" and tags["kgbench.positions_ledger"] == str(tmp_path / LEDGER_NAME)
    a, b = [first.next()[0] for _ in range(100)], [second.next()[0] for _ in range(100)]
    assert a == [own.next()[0] for _ in range(100)]  # the first job's seed orders the sweep
    assert not set(a) & set(b) and len(set(a + b)) == 200


def test_a_foreign_ledger_fails_the_job_with_its_path(tmp_path: Path) -> None:
    (tmp_path / LEDGER_NAME).write_text("not a ledger\n")
    with pytest.raises(JobFailure, match=f"cannot reserve positions in the sweep's ledger {tmp_path / LEDGER_NAME}"):
        job_queries(0, tmp_path, "0: a")


@pytest.mark.slow
def test_the_jobs_of_a_sim_sweep_send_disjoint_positions(tmp_path: Path, two_job_sim_sweep: SimSweep) -> None:
    # the sweep (conftest.py) is read only: its jobs all run load.seed 0, so without the ledger they would send the
    # same positions; the second job's reservations follow the first's in the one order
    code, out, sweep = two_job_sim_sweep.code, two_job_sim_sweep.out, two_job_sim_sweep.folder
    assert code == 0, out
    sent = {job.name: pd.read_csv(job / "requests.csv") for job in sorted((sweep / "multirun").glob("[0-9]"))}
    assert sorted(sent) == ["0", "1"] and all(len(frame) > 0 for frame in sent.values())
    for a, b in itertools.combinations(sent.values(), 2):
        assert not set(a["position"]) & set(b["position"])
    ledger = (sweep / "multirun" / LEDGER_NAME).read_text().splitlines()
    assert ledger[0] == "kgbench position ledger v1: seed=0 positions=13400"
    assert {line.rsplit("job=", 1)[1].split(":")[0] for line in ledger[1:]} == {"0", "1"}

    client = client_for(sweep)
    (parent,) = runs_by_role(client, "sweep")
    assert parent.data.metrics["position_repeats"] == 0
    jobs = runs_by_role(client, "job")
    for run in jobs:
        tags, metrics = run.data.tags, run.data.metrics
        assert tags["kgbench.cold_start"] == "true" and tags["kgbench.positions"] == "sweep"
        assert metrics["position_repeats"] == 0 and metrics["position_repeat_rate"] == 0
    # every request in requests.csv was handed a position (a request cancelled at the end of a level may not be)
    total = sum(run.data.metrics["positions_sent"] for run in jobs)
    assert parent.data.metrics["positions_sent"] == total >= sum(len(frame) for frame in sent.values())
    assert "cold start: 2 of 2 jobs started their own kgserve and engines" in out
    assert "positions: unique across the sweep" in out

    assert report.main(["--tracking-uri", client.tracking_uri, "--out", str(tmp_path / "report"), "--no-log"]) == 0
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "- cold start: 2 of 2 jobs" in summary and "- positions: unique across the sweep" in summary
