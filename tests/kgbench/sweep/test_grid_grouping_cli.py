"""A real grid multirun: jobs that share a TensorRT build run back to back whatever the overrides' order.
No TensorRT here: each trt job fails before any engine starts, after its params and tags are recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.kgbench_runs import client_for, run_kgbench, runs_by_role

pytestmark = pytest.mark.slow


def test_trt_jobs_of_one_build_run_back_to_back(tmp_path: Path) -> None:
    # Hydra's product varies the last override fastest: 64, 128, 64, 128 unless kgbench regroups them
    code, out = run_kgbench(tmp_path, "-m", "backend=trt", "numAnalysisThreads=8,16", "nnMaxBatchSize=64,128")
    assert "Traceback" not in out
    assert code == 1, out  # every job failed (no TensorRT binary here), each recorded
    assert "jobs reordered so that jobs sharing a TensorRT build run back to back" in out
    client = client_for(tmp_path)
    jobs = sorted(runs_by_role(client, "job"), key=lambda run: run.info.start_time)
    assert [run.data.params["katago.nnMaxBatchSize"] for run in jobs] == ["64", "64", "128", "128"]
    assert [run.data.params["katago.numAnalysisThreads"] for run in jobs] == ["8", "16", "8", "16"]
    assert [run.data.tags["kgbench.build_group"] for run in jobs][::2] == [
        "trt nnMaxBatchSize=64 trtUseFP16=auto", "trt nnMaxBatchSize=128 trtUseFP16=auto",
    ]  # fmt: skip
    assert all(run.data.tags["kgbench.cold_start"] == "true" for run in jobs)
