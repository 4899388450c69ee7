"""The node qualification rehearsed end to end on the real CPU KataGo (what CI runs before any GPU is at hand)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.katago.conftest import RealKatago

# alone: qualify's verify step compares what kgserve serves with what the job measured, on the same two cores
pytestmark = [pytest.mark.katago, pytest.mark.slow, pytest.mark.alone]


@pytest.mark.timeout(900)
def test_the_whole_qualification_rehearsed_on_the_cpu_build(tmp_path: Path, real_katago: RealKatago) -> None:
    """The seed workflow end to end on the real CPU KataGo with a tiny synthetic net, as CI rehearses it before any
    GPU is at hand: every step runs or says why not (no GPU: no GEMM rate; no TensorRT build: no trt jobs)."""
    out = tmp_path / "qualify"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("MLFLOW_TRACKING_URI", None)
    argv = [sys.executable, "-m", "kgbench.qualify", "--backend", "eigen", "--binary", str(real_katago.binary)]
    argv += ["--net", "synthetic:b2c32nbt", "--budget", "10m", "--out", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=840, cwd=tmp_path)
    results = json.loads((out / "results.json").read_text())
    steps = {s["name"]: s for s in results["steps"]}
    assert done.returncode == 0, done.stderr[-3000:]
    assert [s["name"] for s in results["steps"]] == [
        "node", "build", "net", "gemm", "benchmark", "line", "wide", "promote", "verify", "serve", "pipe"
    ]  # fmt: skip
    assert all(s["status"] in ("ok", "skipped") for s in results["steps"]), [
        (s["name"], s["summary"]) for s in results["steps"]
    ]
    assert steps["gemm"]["status"] == "skipped" and "no GPU" in steps["gemm"]["summary"]
    assert "trt jobs skipped" in steps["build"]["summary"]
    assert steps["net"]["data"]["synthetic"] is True and steps["net"]["data"]["params"] == 29409
    line = steps["line"]["data"]["jobs"]
    assert sorted(job["job"] for job in line) == ["nnMaxBatchSize=16", "nnMaxBatchSize=4", "nnMaxBatchSize=8"]
    assert all(job.get("bottleneck") in ("gpu", "host", "frontend", "batching") for job in line if job.get("req_per_s"))
    promoted = yaml.safe_load((out / "runtime" / "promoted" / "config.yaml").read_text())
    assert promoted["engine"]["throughput_test"] is True  # a synthetic net is served only as a throughput test
    assert steps["verify"]["data"]["exit"] == 0 and "served " in steps["verify"]["summary"]  # at its job's req/s
    assert steps["serve"]["data"]["answer_lines"] == 3
    pipe = steps["pipe"]["data"]
    assert set(pipe["ratios"]) == {"analysis", "policy"} and all(v > 0 for v in pipe["ratios"].values())
    head = results["headline"]
    assert head["analyses_per_s"] > 0 and head["bottleneck"] and head["synthetic_net"] is True
    report = (out / "report.md").read_text()
    assert "## Headline" in report and "analyses/s" in report and "Synthetic net" in report
    assert sorted(p.name for p in (out / "plots").iterdir()) == ["benchmark.png", "jobs.png"]
    assert done.stdout.strip().endswith("report.md")
