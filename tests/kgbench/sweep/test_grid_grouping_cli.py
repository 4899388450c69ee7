"""A real grid multirun: jobs that share a TensorRT build run back to back whatever the overrides' order.
No TensorRT here: a stand-in passes the preflight and each trt job fails as its engine starts, after its params and
tags are recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.kgbench_runs import client_for, run_kgbench, runs_by_role, stub_engine_config

pytestmark = pytest.mark.slow


def test_trt_jobs_of_one_build_run_back_to_back(tmp_path: Path) -> None:
    # Hydra's product varies the last override fastest: 64, 128, 64, 128 unless kgbench regroups them
    config = stub_engine_config(tmp_path, "trt")
    code, out = run_kgbench(tmp_path, "-m", "backend=trt", "numAnalysisThreads=8,16", "nnMaxBatchSize=64,128",
                            f"runtime_config={config}")  # fmt: skip
    assert "Traceback" not in out
    assert code == 1, out  # every job failed (no TensorRT here), each recorded
    assert (
        "kgbench: 2 TensorRT engine build(s): trt nnMaxBatchSize=64 trtUseFP16=auto, trt nnMaxBatchSize=128 "
        "trtUseFP16=auto; the jobs sharing one run back to back (reordered), so TensorRT builds (or loads) each "
        "engine once"
    ) in out
    client = client_for(tmp_path)
    jobs = sorted(runs_by_role(client, "job"), key=lambda run: run.info.start_time)
    assert [run.data.params["katago.nnMaxBatchSize"] for run in jobs] == ["64", "64", "128", "128"]
    assert [run.data.params["katago.numAnalysisThreads"] for run in jobs] == ["8", "16", "8", "16"]
    assert [run.data.tags["kgbench.build_group"] for run in jobs][::2] == [
        "trt nnMaxBatchSize=64 trtUseFP16=auto", "trt nnMaxBatchSize=128 trtUseFP16=auto",
    ]  # fmt: skip
    assert all(run.data.tags["kgbench.cold_start"] == "true" for run in jobs)
