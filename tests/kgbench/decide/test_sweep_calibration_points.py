"""A kgbench sweep in MLflow read as GPU calibration points (benchmarks.calibration.gpu_data.read_sweep)."""

from __future__ import annotations

from benchmarks.calibration.gpu_data import read_sweep

from .conftest import Store

KEYS = {
    "katago.numAnalysisThreads": "64",
    "katago.numSearchThreadsPerAnalysisThread": "2",
    "katago.nnMaxBatchSize": "128",
    "katago.numNNServerThreadsPerModel": "2",
    "engines": "1",
}


def test_load_and_engine_jobs_become_points(store: Store) -> None:
    store.sweep("s1")
    store.job(
        "s1",
        "load",
        params={**KEYS, "load.max_visits": "100"},
        metrics={"headline_concurrency": 256, "nn_avg_batch_size": 61.5, "gpu_mem_peak_mb": 4096.0},
        series={"level_req_per_s": {64: 12.0, 256: 19.0}},
        tags={"mode": "load"},
    )
    store.job(
        "s1",
        "engine",
        params={**KEYS, "bench.visits": "400"},
        series={
            "bench_nn_evals_per_s": {32: 600.0, 64: 1100.0},
            "bench_visits_per_s": {32: 600.0, 64: 1100.0},
            "bench_avg_batch_size": {32: 9.5, 64: 19.0},
        },
        tags={"mode": "engine"},
    )
    store.job("s1", "sim", params={**KEYS, "load.max_visits": "100"}, tags={"simulated": "true"})
    store.job("s1", "pool", params={**KEYS, "engines": "2"}, tags={"mode": "load"})
    store.job("s1", "broken", params=KEYS, status="FAILED")
    data = read_sweep(store.uri, "s1")
    assert [(p.concurrency, p.req_per_s, p.batch) for p in data.loads] == [(64, 12.0, 0.0), (256, 19.0, 61.5)]
    assert {(p.analysis_threads, p.search_threads, p.max_batch, p.server_threads, p.visits) for p in data.loads} == {
        (64, 2, 128, 2, 100)
    }
    # KataGo's benchmark sizes its batches for the largest thread count, whatever nnMaxBatchSize says
    assert [(p.threads, p.max_batch, p.visits, p.evals_per_s, p.batch) for p in data.bench] == [
        (32, 64, 400, 600.0, 9.5),
        (64, 64, 400, 1100.0, 19.0),
    ]
    assert [(m.server_threads, m.max_batch, m.peak_gib) for m in data.memory] == [(2, 128, 4.0)]
    assert sorted(line.split(": ")[1] for line in data.skipped) == ["not ok", "several engines", "simulated"]
    store.sweep("s2")
    store.job("s2", "more", params={**KEYS, "load.max_visits": "100"}, series={"level_req_per_s": {64: 12.5}})
    assert len(read_sweep(store.uri, "all").loads) == 3
    assert len(read_sweep(store.uri, None).loads) == 1  # the latest sweep
