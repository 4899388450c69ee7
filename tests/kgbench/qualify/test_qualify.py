"""python -m kgbench.qualify without an engine: its arguments and choices (tests/katago/test_qualify.py rehearses the
whole workflow on the real CPU build)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kgbench.qualify.__main__ import _parser, options_from_args
from kgbench.qualify.options import parse_budget
from kgbench.qualify.runner import Budget
from kgbench.qualify.sweep_steps import wide_axes
from tests.conftest import REPO


@pytest.mark.parametrize(("text", "seconds"), [("20m", 1200), ("1h30m", 5400), ("900s", 900), ("90", 90)])
def test_budgets_read_as_people_write_them(text: str, seconds: float) -> None:
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "10", "5m-"])
def test_a_budget_that_is_no_budget_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="--budget"):
        parse_budget(text)


def test_the_wider_sweep_turns_the_knob_the_bottleneck_names() -> None:
    cfg = {"numAnalysisThreads": "64", "numSearchThreadsPerAnalysisThread": "4", "numNNServerThreadsPerModel": "2"}
    assert wide_axes("gpu", cfg, 2) == ("numNNServerThreadsPerModel", [1, 4])
    assert wide_axes("kernels", cfg, 2) == ("numNNServerThreadsPerModel", [1, 4])  # busy far below its matrix rate
    assert wide_axes("batching", cfg, 2) == ("numAnalysisThreads", [128, 256])
    assert wide_axes("host", cfg, 3) == ("numSearchThreadsPerAnalysisThread", [2, 1, 8])
    # a value the line already measured is never measured again
    assert wide_axes("host", {**cfg, "numSearchThreadsPerAnalysisThread": "1"}, 3) == (
        "numSearchThreadsPerAnalysisThread",
        [2],
    )


def test_bad_arguments_exit_2_before_anything_runs(tmp_path: Path) -> None:
    out = tmp_path / "busy"
    out.mkdir()
    (out / "something").write_text("x")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for args, message in (
        (["--budget", "soon"], "--budget 'soon'"),
        (["--out", str(out)], "is not empty"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "kgbench.qualify", *args], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 2 and message in done.stderr


def test_steps_pick_the_measurements_and_share_the_budget_of_those_left_out() -> None:
    """--steps line: a second net at the user's line (benchmarks/gpu_h200.sh); node, build, net and gemm always run,
    and the line gets the whole budget instead of its third."""
    options = options_from_args(_parser().parse_args(["--steps", "line", "--budget", "3m"]))
    assert options.steps == frozenset({"line"})
    assert options_from_args(_parser().parse_args([])).steps is None
    for bad in ("gemm", "line,nope", ","):
        with pytest.raises(ValueError, match="--steps"):
            options_from_args(_parser().parse_args(["--steps", bad]))
    budget = Budget(300)
    assert budget.share(0.33, 120) == pytest.approx(120, abs=1)
    budget.widen = 1.0 / 0.33
    assert budget.share(0.33, 120) == pytest.approx(300, abs=1)
