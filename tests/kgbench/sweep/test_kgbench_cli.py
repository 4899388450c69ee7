"""`python -m kgbench` end to end in a subprocess, with a throwaway MLflow store and Hydra output dirs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.helpers.kgbench_runs import client_for, run_kgbench, runs_by_role


@pytest.mark.slow
def test_users_line_without_katago_records_six_failed_runs(tmp_path: Path) -> None:
    code, out = run_kgbench(tmp_path, "-m", "backend=cuda,trt", "nnMaxBatchSize=64,128,256")
    assert code != 0, out
    assert "Traceback" not in out, out
    assert "kgbench sweep: 6 job(s), sorted by req/s" in out
    client = client_for(tmp_path)
    (parent,) = runs_by_role(client, "sweep")
    assert parent.info.status == "FAILED"
    children = runs_by_role(client, "job")
    assert len(children) == 6
    seen = set()
    for run in children:
        assert run.info.status == "FAILED"
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        backend = run.data.tags["backend"]
        reason = run.data.tags["kgbench.failure_reason"]
        assert "\n" not in reason
        assert f"runtime/bin/{backend}/katago does not exist" in reason, reason
        assert "backend=sim" in reason
        seen.add((backend, run.data.params["katago.nnMaxBatchSize"]))
        assert run.data.params["backend"] == backend
        assert "katago.cfg" in {a.path for a in client.list_artifacts(run.info.run_id)}
    assert seen == {(b, n) for b in ("cuda", "trt") for n in ("64", "128", "256")}
    assert not list((tmp_path / "multirun").rglob("kgserve_stderr.log"))  # nothing was started


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
    code, out = run_kgbench(tmp_path, "-m", "experiment=h200", "nnMaxBatchSize=64", "numAnalysisThreads=64")
    assert code != 0, out  # no KataGo here: both jobs fail before starting anything
    assert "Traceback" not in out, out
    assert "kgbench sweep: 2 job(s), sorted by req/s" in out
    jobs = [yaml.safe_load((tmp_path / "multirun" / str(n) / ".hydra" / "overrides.yaml").read_text()) for n in (0, 1)]
    assert jobs == [
        ["backend=cuda", "++nnMaxBatchSize=64", "++numAnalysisThreads=64", "experiment=h200"],
        ["backend=trt", "++nnMaxBatchSize=64", "++numAnalysisThreads=64", "experiment=h200"],
    ]
    assert "job 1/2" in out
