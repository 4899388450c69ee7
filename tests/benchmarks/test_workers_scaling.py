"""The server.workers scaling benchmark: client processes' rounds merge into one, and a tiny real run."""

from __future__ import annotations

import pytest

from benchmarks.rig.client import RoundResult
from benchmarks.workers_scaling import ScalingRound, main, parse_args


def test_rounds_of_client_processes_merge() -> None:
    parts = [RoundResult(100, 1, 2.0, [1.0] * 100, 0.5, 0.2), RoundResult(300, 0, 2.2, [3.0] * 300, 0.7)]
    merged = ScalingRound.merge(parts)
    assert (merged.ok, merged.errors, merged.wall_s) == (400, 1, pytest.approx(2.1))
    assert merged.req_per_s == pytest.approx(400 / 2.1)
    assert merged.quantile_ms(0.5) == 3.0 and merged.quantile_ms(0.0) == 1.0
    assert merged.cpu_us_per_query == pytest.approx(500.0)
    assert merged.client_cpu_s == pytest.approx(1.2)


def test_arguments_are_checked() -> None:
    assert parse_args(["--counts", "1,2,4"]).counts == [1, 2, 4]
    for bad in (["--counts", "1,x"], ["--counts", "0"], ["--clients", "4", "--in-flight", "2"]):
        with pytest.raises(SystemExit):
            parse_args(bad)


@pytest.mark.slow
def test_a_tiny_scaling_run_prints_one_row_per_count(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--counts", "1,2", "--clients", "2", "--in-flight", "8", "--rounds", "1", "--seconds", "0.5"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| 1 |") or line.startswith("| 2 |")]
    assert len(rows) == 2
    assert all(line.rstrip().endswith("| 0 |") for line in rows)  # no errors
