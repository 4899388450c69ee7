"""mode=engine against the real engine: kgbench renders the GTP-style benchmark cfg, runs a real
`katago benchmark` and parses what it printed (tests/kgbench/enginebench/test_enginebench.py parses a recording of it),
directly and through `python -m kgbench mode=engine` into MLflow."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgbench.enginebench.parse import parse_benchmark_output
from kgbench.enginebench.run import run_engine_benchmark
from tests.helpers.kgbench_runs import client_for, run_kgbench, runs_by_role
from tests.katago.conftest import TIER_CFG, RealKatago, tier_config

pytestmark = [pytest.mark.katago, pytest.mark.slow]

THREADS = [1, 2]


def test_real_katago_benchmark_is_parsed(tmp_path: Path, real_katago: RealKatago) -> None:
    bench = run_engine_benchmark(
        argv_prefix=[str(real_katago.binary)],
        cfg_keys=TIER_CFG,  # an analysis cfg: its analysis-only keys must be dropped, or KataGo refuses it
        model=real_katago.model,
        visits=40,
        threads=THREADS,
        positions=2,
        workdir=tmp_path,
        home_data_dir=tmp_path / "katago_home",
        timeout_s=240,
        startup_timeout_s=60,
        progress=None,
    )
    result = bench.result
    assert result.visits == 40
    assert sorted(result.visits_per_s()) == THREADS and all(v > 0 for v in result.visits_per_s().values())
    assert result.recommended_source == "katago" and result.recommended_threads in THREADS
    rows = result.by_threads()
    assert all(rows[t].nn_evals_per_s > 0 and rows[t].avg_batch_size >= 1 for t in THREADS)
    assert rows[THREADS[0]].elo_diff == 0.0  # KataGo's Elo column is relative to the first thread count
    metrics = bench.metrics()
    assert metrics["recommended_threads"] == result.recommended_threads
    assert bench.engine_start_s is not None and 0 < bench.engine_start_s < bench.wall_s
    assert bench.trt_cache is None  # Eigen: no TensorRT cache line
    # what was parsed is what KataGo printed, and the rendered cfg left KataGo nothing to complain about
    assert parse_benchmark_output((tmp_path / "benchmark.stdout.log").read_text()) == result
    assert "Unused key" not in bench.stdout + bench.stderr


def test_mode_engine_sweep_logs_the_real_benchmark(tmp_path: Path, real_katago: RealKatago) -> None:
    """The same through `python -m kgbench backend=eigen mode=engine`: one MLflow run of real figures."""
    config = tier_config(tmp_path, real_katago)
    code, out = run_kgbench(
        tmp_path, "backend=eigen", "mode=engine", "engine_bench.threads=[1,2]", "engine_bench.visits=40",
        "engine_bench.positions=2", f"runtime_config={config}",
    )  # fmt: skip
    assert code == 0, out
    client = client_for(tmp_path)
    (run,) = runs_by_role(client, "job")
    assert run.info.status == "FINISHED", run.data.tags.get("kgbench.failure_reason")
    assert run.data.tags["simulated"] == "false" and run.data.tags["kgbench.recommended_threads"] in ("1", "2")
    assert run.data.metrics["visits_per_s"] > 0 and run.data.metrics["engine_start_s"] > 0
    history = client.get_metric_history(run.info.run_id, "bench_visits_per_s")
    assert sorted(m.step for m in history) == THREADS and all(m.value > 0 for m in history)
