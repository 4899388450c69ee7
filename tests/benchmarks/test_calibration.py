"""The calibration benchmark's parts: rank correlation, capacity, the engine-pipe load, and a whole run from saved
measurements against the simulated engine (no KataGo needed)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from benchmarks.calibration import cpu as calibration
from benchmarks.calibration.cpu import GRID, Point, capacity, spearman
from kgbench.enginepipe.engineload import EngineLoadResult, nineteen_by_nineteen, run_engine_load_sync
from kgserve.sim.model.throughput import predict_throughput
from tests.conftest import SIM_MODEL


def test_spearman() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4, 5], [1, 3, 2, 4, 5]) == pytest.approx(0.9)
    assert spearman([1, 1, 2, 3], [5, 5, 6, 7]) == pytest.approx(1.0)  # ties share their average rank
    assert spearman([1, 1, 1], [1, 2, 3]) == 0.0
    with pytest.raises(ValueError, match="same length"):
        spearman([1, 2], [1, 2, 3])


def test_capacity_counts_the_cores_a_cfg_can_use() -> None:
    assert capacity(Point(1, 1, 1, 1), 0.2, 2) == pytest.approx(5.0)  # one search thread: one core
    assert capacity(Point(1, 2, 2, 1), 0.2, 2) == pytest.approx(10.0)
    assert capacity(Point(32, 1, 32, 2), 0.2, 2) == pytest.approx(10.0)
    assert capacity(Point(32, 1, 32, 2), 0.2, 16) == pytest.approx(80.0)


def test_grid_spans_the_four_keys() -> None:
    assert len(GRID) >= 12 and len(set(GRID)) == len(GRID)
    for key in ("analysis_threads", "search_threads", "max_batch", "server_threads"):
        assert len({getattr(p, key) for p in GRID}) >= 2, key
    assert set(GRID[0].cfg()) == {
        "numAnalysisThreads",
        "numSearchThreadsPerAnalysisThread",
        "nnMaxBatchSize",
        "numNNServerThreadsPerModel",
    }


def _sim_argv(tmp_path: Path, analysis_threads: int) -> list[str]:
    cfg = tmp_path / "sim.cfg"
    cfg.write_text(f"numAnalysisThreads = {analysis_threads}\nnnMaxBatchSize = 8\nlogToStderr = false\n")
    return [sys.executable, "-m", "kgserve.sim", "analysis", "-config", str(cfg), "-model", str(SIM_MODEL)]


def _sim_env(speed: float) -> dict[str, str]:
    return {
        **os.environ,
        "KGSERVE_SIM_PROFILE": "cpu-eigen-b6c96",
        "KGSERVE_SIM_SPEED": f"{speed:g}",
        "KGSERVE_SIM_DEVICE": "private",
        "KGSERVE_SIM_STARTUP_S": "0.01",
    }


def test_engine_load_through_the_pipe(tmp_path: Path) -> None:
    result = run_engine_load_sync(
        _sim_argv(tmp_path, 4), nineteen_by_nineteen(0), visits=16, queries=20, concurrency=4, env=_sim_env(100)
    )
    assert (result.answered, result.errors, result.measured) == (20, 0, 16)
    assert result.req_per_s > 0 and result.measure_s > 0 and result.startup_s > 0
    assert result.cpu_s >= 0 and result.cpu_per_query == pytest.approx(result.cpu_s / 16)
    assert 1.0 <= result.nn_avg_batch <= 8.0  # from the exit log (NN rows / NN batches)
    with pytest.raises(ValueError, match="must exceed concurrency"):
        run_engine_load_sync(_sim_argv(tmp_path, 4), nineteen_by_nineteen(0), visits=16, queries=4, concurrency=4)


def test_engine_that_never_gets_ready_is_reported(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "import sys; sys.stderr.write('no model here\\n')"]
    with pytest.raises(RuntimeError, match=r"exited before it was ready.*no model here"):
        run_engine_load_sync(argv, nineteen_by_nineteen(0), visits=1, queries=2, concurrency=1)


def test_saved_measurements_round_trip_and_missing_points_are_named(tmp_path: Path) -> None:
    fake = EngineLoadResult(req_per_s=1.0, answered=24, errors=0, measured=12, measure_s=12.0, startup_s=0.5, cpu_s=2.4)
    real = {p: [fake, fake] for p in GRID}
    path = tmp_path / "real.json"
    calibration._save(path, real, {"visits": 32})
    assert calibration._load(path) == real
    calibration._save(path, {p: runs for p, runs in real.items() if p != GRID[3]}, {})
    with pytest.raises(SystemExit, match=GRID[3].label):
        calibration._load(path)


@pytest.mark.slow
def test_whole_run_from_saved_measurements(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # real measurements made up from the closed-form model: the report must then rank them exactly as the model
    # (the sim column is timed on loaded cores, so only its presence is checked)
    real = {}
    for p in GRID:
        rps = predict_throughput(p.cfg(), 8, p.analysis_threads, profile="cpu-eigen-b6c96")
        cpu = calibration.usable_cores(p, 2) / rps
        real[p] = [EngineLoadResult(rps, 20, 0, 12, 12 / rps, 0.3, cpu * 12)]
    saved = tmp_path / "real.json"
    calibration._save(saved, real, {})
    monkeypatch.setenv("KGBENCH_KATAGO_MODEL", str(SIM_MODEL))
    assert calibration.main(["--load", str(saved), "--visits", "8", "--sim-speed", "10", "--cores", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n| ") == len(GRID) + 1
    assert "vs the closed-form model: 1.000" in out
    sims = [float(line.split("|")[7]) for line in out.splitlines() if line.startswith("| ") and "x" in line[:6]]
    assert len(sims) == len(GRID) and min(sims) > 0
    assert "worst per-point error" in out and "pairs the measurement tells apart" in out
