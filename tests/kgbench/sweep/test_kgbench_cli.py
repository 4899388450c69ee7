"""`python -m kgbench` end to end in a subprocess, with a throwaway MLflow store and Hydra output dirs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.helpers.kgbench_runs import client_for, run_kgbench, runs_by_role, stub_engine_config


@pytest.mark.slow
def test_users_line_without_katago_is_refused_before_any_run(tmp_path: Path) -> None:
    """Every job would fail for want of KataGo: one message naming the fix, no MLflow run, nothing started."""
    code, out = run_kgbench(tmp_path, "-m", "backend=cuda,trt", "nnMaxBatchSize=64,128,256", seed_store=False)
    assert code == 2, out
    assert "Traceback" not in out, out
    assert "kgbench: nothing to run: no job can start here" in out and "nothing was recorded in MLflow" in out
    assert "backend=cuda (3 jobs):" in out and "backend=trt (3 jobs):" in out
    assert "runtime/bin/trt/katago does not exist" in out
    assert "runtime/fetch_katago.sh" in out and "backend=sim" in out
    assert "kgbench sweep:" not in out and "cold start" not in out and "mode=engine" not in out
    assert not (tmp_path / "mlflow.db").exists()  # no store, no run, no parent
    assert not list((tmp_path / "multirun").glob("*/.hydra"))  # no job was launched


@pytest.mark.slow
def test_a_single_run_without_katago_is_refused_too(tmp_path: Path) -> None:
    code, out = run_kgbench(tmp_path, "backend=eigen", seed_store=False)
    assert code == 2 and "nothing to run" in out and "engine.binary=PATH" in out, out
    assert not (tmp_path / "mlflow.db").exists()


@pytest.mark.slow
def test_a_sweep_runs_the_jobs_that_can_start_and_names_the_others(tmp_path: Path) -> None:
    # one level (load=smoke has two): which jobs run and which are named skipped is what this test reads
    code, out = run_kgbench(tmp_path, "-m", "backend=sim,cuda", "nnMaxBatchSize=8", "load=smoke",
                            "load.concurrency=[4]", env={"KGSERVE_SIM_SPEED": "20"})  # fmt: skip
    assert code == 0, out
    assert "kgbench: skipping 1 of 2 jobs, which cannot start here (the other 1 run):" in out
    assert "kgbench sweep: 1 job(s), sorted by req/s" in out
    skipped = "backend=cuda nnMaxBatchSize=8 load=smoke load.concurrency=[4]: the engine binary"
    assert f"skipped before start: 1 job(s): {skipped}" in out
    client = client_for(tmp_path)
    (parent,) = runs_by_role(client, "sweep")
    assert skipped in parent.data.tags["kgbench.skipped_jobs"]
    (job,) = runs_by_role(client, "job")
    assert job.data.tags["backend"] == "sim" and job.info.status == "FINISHED"


@pytest.mark.slow
def test_misspelt_key_fails_before_anything_starts(tmp_path: Path) -> None:
    code, out = run_kgbench(tmp_path, "backend=sim", "nnMaxBatchSze=64")
    assert code != 0, out
    assert "Traceback" not in out, out
    assert "'nnMaxBatchSze'" in out and "did you mean 'nnMaxBatchSize'" in out
    assert not list(tmp_path.rglob("kgserve_stderr.log"))
    (run,) = runs_by_role(client_for(tmp_path), "job")
    assert run.info.status == "FAILED"
    assert "nnMaxBatchSize" in run.data.tags["kgbench.failure_reason"]


@pytest.mark.slow
def test_help_and_cfg_exit_zero(tmp_path: Path) -> None:
    code, out = run_kgbench(tmp_path, "--cfg", "job", "backend=sim", "nnMaxBatchSize=8")
    assert code == 0, out
    assert "nnMaxBatchSize: 8" in out


@pytest.mark.slow
def test_experiment_h200_runs_its_sweep_in_order_with_the_command_lines_keys(tmp_path: Path) -> None:
    config = stub_engine_config(tmp_path, "cuda", "trt")  # KataGo stand-ins: each job fails as its engine starts
    code, out = run_kgbench(tmp_path, "-m", "experiment=h200", "nnMaxBatchSize=64", "numAnalysisThreads=64",
                            f"runtime_config={config}")  # fmt: skip
    assert code != 0, out
    assert "Traceback" not in out, out
    assert "kgbench sweep: 2 job(s), sorted by turns/s" in out  # experiment=h200 sweeps batch traffic (issue 40)
    jobs = [yaml.safe_load((tmp_path / "multirun" / str(n) / ".hydra" / "overrides.yaml").read_text()) for n in (0, 1)]
    line = ["++nnMaxBatchSize=64", "++numAnalysisThreads=64", "experiment=h200", f"++runtime_config={config}"]
    assert jobs == [["backend=cuda", *line], ["backend=trt", *line]]
    assert "job 1/2" in out
