"""The sweep-wide progress: a bar with the time left on a terminal, a line per finished job elsewhere; a job's own
lines print alongside it."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from rich.console import Console

from kgbench.sweep import progress


@pytest.fixture(autouse=True)
def _no_sweep_left() -> Iterator[None]:
    yield
    progress.stop_sweep()


def test_off_a_terminal_each_finished_job_says_how_many_are_left() -> None:
    out = io.StringIO()
    progress.start_sweep(3, Console(file=out, force_terminal=False, width=200))
    with progress.JobProgress(0, 3, "backend=sim nnMaxBatchSize=8") as job:
        job.stage("starting kgserve")
    progress.job_done()
    progress.job_done()
    progress.job_done()
    lines = out.getvalue().splitlines()
    assert lines[0] == "job 1/3 [backend=sim nnMaxBatchSize=8]: starting kgserve"
    assert lines[1].startswith("sweep: 1 of 3 jobs done in 0m") and lines[1].endswith("left")
    assert lines[3].startswith("sweep: 3 of 3 jobs done in") and "left" not in lines[3]


def test_on_a_terminal_the_bar_shows_jobs_done_and_time_left_under_the_job_lines() -> None:
    out = io.StringIO()
    bar = progress.start_sweep(2, Console(file=out, force_terminal=True, width=160))
    assert bar.live is not None
    with progress.JobProgress(0, 2, "cuda b64") as job:
        job.stage("ready after 1.0 s")
        progress.job_done()
        bar.live.refresh()
    progress.stop_sweep()
    text = out.getvalue()
    assert "job 1/2 [cuda b64]: ready after 1.0 s" in text
    assert "sweep" in text and "1/2" in text and "left" in text
