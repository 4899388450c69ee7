"""python -m kgbench.qualify without an engine: its arguments and choices (tests/katago/test_qualify.py rehearses the
whole workflow on the real CPU build)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kgbench.qualify.options import parse_budget
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
