"""The preflight (kgbench.sweep.preflight): which jobs cannot start here and why, from their composed configs,
before anything runs or is recorded."""

from __future__ import annotations

from pathlib import Path

from kgbench.sweep.preflight import job_problems, plan
from tests.helpers.kgbench_runs import composed, stub_engine_config

NO_TENSORRT = (
    "#!/bin/sh\n"
    'echo "katago: error while loading shared libraries: libnvinfer.so.10: cannot open shared object file: '
    'No such file or directory" >&2\n'
    "exit 127\n"
)


def test_a_sweep_without_katago_is_refused_with_the_fix() -> None:
    jobs = [(f"backend={b} nnMaxBatchSize={n}", composed(f"backend={b}", f"nnMaxBatchSize={n}"))
            for b in ("cuda", "trt") for n in (64, 128)]  # fmt: skip
    result = plan(jobs)
    assert result.runnable == () and len(result.skipped) == 4
    refusal = result.refusal()
    assert refusal is not None
    lines = refusal.splitlines()
    assert lines[0].startswith("nothing to run: no job can start here") and "nothing was recorded in MLflow" in lines[0]
    assert "  backend=cuda (2 jobs):" in lines and "  backend=trt (2 jobs):" in lines
    assert any("runtime/bin/trt/katago does not exist" in line for line in lines)
    assert "runtime/fetch_katago.sh" in refusal and "backend=sim" in refusal and "engine.binary=PATH" in refusal
    assert result.skip_lines() == []


def test_jobs_that_can_run_run_and_the_others_are_named() -> None:
    result = plan([("backend=sim", composed("backend=sim")), ("backend=cuda", composed("backend=cuda"))])
    assert result.runnable == (0,) and result.refusal() is None
    lines = result.skip_lines()
    assert lines[0] == "skipping 1 of 2 jobs, which cannot start here (the other 1 run):"
    assert lines[1] == "  backend=cuda (1 job):" and "runtime/bin/cuda/katago does not exist" in lines[2]
    assert result.skipped[0][0] == "backend=cuda"


def test_a_tensorrt_build_without_its_libraries_is_named(tmp_path: Path) -> None:
    """The binary and model exist, but the build cannot start: `katago version` says which library is missing."""
    config = stub_engine_config(tmp_path, "trt", script=NO_TENSORRT)
    trt = composed("backend=trt", f"runtime_config={config}")
    (problem,) = job_problems(trt)
    stub = tmp_path / "stub-katago"
    assert problem == f"the engine binary {stub} cannot start: TensorRT library is missing (libnvinfer.so.10)"
    refusal = plan([("backend=trt", trt)]).refusal()
    assert refusal is not None and "TensorRT container (runtime/enroot_start.pbs)" in refusal
    assert job_problems(composed("backend=sim", f"runtime_config={config}")) == []


def test_an_engine_named_on_the_command_line_is_checked() -> None:
    (problem,) = job_problems(
        composed("backend=eigen", "engine.binary=/nowhere/katago", "engine.model=/nowhere/n.bin")
    )[:1]
    assert "/nowhere/katago does not exist" in problem
