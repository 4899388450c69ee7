"""`python -m kgbench.report` against a real MLflow store: table, PNGs, Markdown, parent-run artifacts."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest

from kgbench.decide import report as report_mod
from kgbench.decide.reportplots import pareto_front

from .conftest import Store

OK = {"errors": 0, "timeouts": 0, "p50_ms": 300.0, "visits_per_s": 900.0, "nn_avg_batch_size": 12.5}


def _plant(store: Store) -> dict[str, str]:
    store.sweep("rep")
    ids = {}
    for i, (backend, batch, rps, p99, errors) in enumerate(
        [
            ("trt", "32", 12.0, 800.0, 0),
            ("trt", "64", 15.0, 900.0, 0),
            ("cuda", "32", 10.0, 700.0, 0),
            ("cuda", "64", 18.0, 1200.0, 2),
        ]
    ):
        levels = {c: rps * min(1.0, c / 16) for c in (1, 4, 16, 64)}
        ids[f"{backend}{batch}"] = store.job(
            "rep", f"job{i}", backend=backend,
            metrics={**OK, "req_per_s": rps, "p99_ms": p99, "errors": errors, "gpu_util_mean": 50.0 + i},
            params={"katago.nnMaxBatchSize": batch, "katago.numSearchThreads": "1", "load.visits": "32"},
            tags={"kgbench.trt_cache": "miss" if i == 0 else "hit"} if backend == "trt" else None,
            series={"level_req_per_s": levels},
        )  # fmt: skip
    return ids


def _assert_real_png(path: Path) -> None:
    assert path.stat().st_size > 10_000
    pixels = mpimg.imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 300 and pixels.shape[1] > 300
    flat = pixels[..., :3].reshape(-1, 3)
    colours = np.unique((flat * 255).astype(np.uint8), axis=0)
    assert len(colours) > 20  # axes, text, several coloured markers: not a blank canvas
    assert not np.all(flat == flat[0])


def test_report_table_plots_summary_and_artifacts(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _plant(store)
    out = tmp_path / "report"
    assert report_mod.main(["--tracking-uri", store.uri, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"report written to {out}" in printed

    table = pd.read_csv(out / "runs.csv")
    assert len(table) == 4
    assert set(table["run_id"]) == set(ids.values())
    assert list(table["req_per_s"]) == [18.0, 15.0, 12.0, 10.0]
    assert "nnMaxBatchSize" in table.columns  # swept key
    assert "numSearchThreads" not in table.columns  # same in every run: not swept
    assert "trt_cache" in table.columns and sorted(table["trt_cache"].dropna()) == ["hit", "miss"]
    for column in ("backend", "visits_per_s", "p50_ms", "p99_ms", "errors", "nn_avg_batch_size", "gpu_util_mean"):
        assert column in table.columns
    assert table.loc[table["winner"], "run_id"].tolist() == [ids["trt64"]]  # the faster run has errors

    _assert_real_png(out / "pareto.png")
    _assert_real_png(out / "throughput_vs_concurrency.png")
    summary = (out / "summary.md").read_text()
    assert f"`{ids['trt64']}`" in summary and "![pareto](pareto.png)" in summary
    assert summary.count("\n| ") >= 5  # header + 4 rows

    parent = store.sweeps["rep"]
    logged = {a.path for a in store.client.list_artifacts(parent, "report")}
    assert logged == {f"report/{n}" for n in ("runs.csv", "summary.md", "pareto.png", "throughput_vs_concurrency.png")}


def test_report_engine_mode_series_and_missing_sweep(store: Store, tmp_path: Path) -> None:
    store.sweep("eng")
    store.job("eng", "bench", backend="sim", tags={"simulated": "true"},
              metrics={"visits_per_s": 206.0, "engine_start_s": 0.4},
              series={"bench_visits_per_s": {1: 87.65, 2: 159.23, 4: 206.06, 8: 213.33}})  # fmt: skip
    out = tmp_path / "eng"
    assert report_mod.main(["--tracking-uri", store.uri, "--sweep", "eng", "--out", str(out), "--no-log"]) == 0
    table = pd.read_csv(out / "runs.csv")
    assert len(table) == 1 and "trt_cache" not in table.columns
    _assert_real_png(out / "throughput_vs_concurrency.png")
    assert "SIMULATED" in (out / "summary.md").read_text()
    assert report_mod.main(["--tracking-uri", store.uri, "--sweep", "absent", "--out", str(out)]) == 1


def test_a_sweep_without_job_runs_gets_a_report_saying_so(store: Store, tmp_path: Path) -> None:
    store.sweep("none")  # e.g. a search whose budget was already spent: the sweep ran no job
    out = tmp_path / "none"
    assert report_mod.main(["--tracking-uri", store.uri, "--sweep", "none", "--out", str(out), "--no-log"]) == 0
    summary = (out / "summary.md").read_text()
    assert "no run satisfies the promote rule" in summary and "(no job run in this sweep)" in summary
    _assert_real_png(out / "pareto.png")


def test_pareto_front() -> None:
    points = [(800.0, 12.0), (900.0, 15.0), (700.0, 10.0), (1000.0, 14.0), (900.0, 11.0)]
    assert pareto_front(points) == [(700.0, 10.0), (800.0, 12.0), (900.0, 15.0)]


def test_missing_store_is_not_created(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = f"sqlite:///{tmp_path / 'absent.db'}"
    assert report_mod.main(["--tracking-uri", uri, "--out", str(tmp_path / "r")]) == 1
    assert "no MLflow store" in capsys.readouterr().err
    assert not (tmp_path / "absent.db").exists()


def test_report_shows_intervals_knees_and_the_tie_decision(store: Store, tmp_path: Path) -> None:
    store.sweep("noise")
    ids = {}
    for name, rps, low, high, p99 in (("fast", 7.6, 7.1, 8.1, 2350.0), ("steady", 7.33, 7.0, 7.66, 570.0)):
        levels = {4: rps / 2, 16: rps * 0.96, 64: rps}
        ids[name] = store.job(
            "noise", name, backend="cuda",
            metrics={**OK, "req_per_s": rps, "p99_ms": p99, "req_per_s_ci_low": low, "req_per_s_ci_high": high,
                     "goodput_per_s": rps * 0.9, "slo_ms": 1500.0, "knee_concurrency": 16.0,
                     "engine_start_s": 42.0, "position_repeat_rate": 0.0, "positions_sent": 500.0,
                     "position_repeats": 0.0, "positions_distinct": 13400.0},
            params={"katago.nnMaxBatchSize": "64" if name == "fast" else "32"},
            tags={"kgbench.cold_start": "true", "kgbench.positions": "sweep"},
            series={"level_req_per_s": levels, "level_req_per_s_ci_low": {c: v * 0.9 for c, v in levels.items()},
                    "level_req_per_s_ci_high": {c: v * 1.1 for c, v in levels.items()}},
        )  # fmt: skip
    out = tmp_path / "report"
    assert report_mod.main(["--tracking-uri", store.uri, "--out", str(out), "--sweep", "noise"]) == 0
    table = pd.read_csv(out / "runs.csv")
    for column in ("req_per_s_ci_low", "req_per_s_ci_high", "goodput_per_s", "knee_concurrency", "engine_start_s"):
        assert column in table.columns
    assert table.loc[table["winner"], "run_id"].tolist() == [ids["steady"]]  # tied on req/s, lower p99
    summary = (out / "summary.md").read_text()
    assert "tied within noise" in summary and "the leader's p99 is over 25% above" in summary
    assert "cold start: 2 of 2 jobs started their own kgserve and engines (kgserve restarted" in summary
    assert "positions: unique across the sweep: 1,000 sent by 2 jobs, none twice" in summary
    _assert_real_png(out / "throughput_vs_concurrency.png")
