"""The job runner's pieces without a sweep: prepare (render + kgserve config), engine file checks, the sweep
summary with the http/direct overhead, plots, exit status."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from kgbench.load.types import LevelSummary, RequestRecord
from kgbench.sweep import state
from kgbench.sweep.compose.render import RenderError
from kgbench.sweep.compose.spec import check_engine_files, prepare
from kgbench.sweep.failure import JobFailure
from kgbench.track import summary, tracking
from kgbench.track.plots import write_plots
from kgserve.settings import load_settings
from tests.conftest import REPO
from tests.helpers.kgbench_runs import composed
from tests.helpers.mlflow_store import seeded_uri


def test_prepare_writes_the_cfg_and_a_job_local_kgserve_config(tmp_path: Path) -> None:
    cfg = composed("backend=sim", "engines=3", "nnMaxBatchSize=16", "load.concurrency=[8,600]")
    prepared = prepare(cfg, tmp_path / "job", "backend=sim engines=3")
    assert prepared.cfg_path == (tmp_path / "job" / "katago.cfg").resolve()
    text = prepared.cfg_path.read_text()
    assert "nnMaxBatchSize = 16" in text and "# overrides: backend=sim engines=3" in text
    settings = load_settings(prepared.kgserve_config)
    assert settings.engine.backend == "sim" and settings.engine.processes == 3
    assert settings.engine.cfg == prepared.cfg_path
    assert settings.server.host == "127.0.0.1" and settings.server.port == 0
    assert settings.server.auth_token_env is None
    assert settings.limits.max_inflight_queries >= 1200
    assert settings.engine.model_for("sim").is_absolute() and settings.engine.model_for("sim").is_file()
    assert str(settings.engine.home_data_dir) == prepared.rendered.keys["homeDataDir"]
    check_engine_files(prepared)  # the sim has everything it needs


def test_a_jobs_kgserve_serves_the_runtimes_settings_but_what_its_load_generator_needs(tmp_path: Path) -> None:
    """Issue 33: the sweep measured with the thread reserve off and the per-client caps wide open, so what
    `python -m kgserve` then served was not what the sweep measured; issue 40: nor the caps it still widened."""
    runtime = load_settings(REPO / "runtime" / "config.yaml")
    prepared = prepare(composed("backend=sim", "load.concurrency=[8,1024]"), tmp_path / "job")
    job = load_settings(prepared.kgserve_config)
    assert job.engine.thread_reserve == runtime.engine.thread_reserve > 0
    assert (job.limits.memory_per_client_bytes, job.priority, job.websocket, job.server.workers) == (
        runtime.limits.memory_per_client_bytes,
        runtime.priority,
        runtime.websocket,
        runtime.server.workers,
    )
    # issue 40: one client at 1024 in flight serves the runtime's limits unchanged (no per-client cap widened, no
    # pacing lifted: kgserve's per-client defences are work-conserving), so what it measures is what is served
    assert [c.key for c in prepared.serving_changes] == ["server.port"]
    assert job.limits == runtime.limits
    small = prepare(composed("backend=sim", "load=smoke"), tmp_path / "smoke")
    assert [c.key for c in small.serving_changes] == ["server.port"]


def test_missing_binary_names_the_path_and_suggests_sim(tmp_path: Path) -> None:
    prepared = prepare(composed("backend=trt"), tmp_path)
    with pytest.raises(JobFailure) as info:
        check_engine_files(prepared)
    message = str(info.value)
    assert "runtime/bin/trt/katago does not exist" in message and "backend=sim" in message
    assert "runtime/config.yaml" in message and "\n" not in message


@pytest.mark.parametrize(
    ("override", "needle"),
    [("mode=fast", "mode=load or mode=engine"), ("transport=grpc", "transport=http"), ("engines=0", "engines=0")],
)
def test_bad_kgbench_keys_fail_before_anything(tmp_path: Path, override: str, needle: str) -> None:
    with pytest.raises(JobFailure, match=needle):
        prepare(composed("backend=sim", override), tmp_path)
    assert not (tmp_path / "katago.cfg").exists()


def test_unknown_key_fails_prepare(tmp_path: Path) -> None:
    with pytest.raises(RenderError, match="nnMaxBatchSize"):
        prepare(composed("backend=sim", "nnMaxBatchSze=64"), tmp_path)


@pytest.mark.slow
def test_overhead_and_table_from_a_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", seeded_uri(tmp_path / "mlflow.db"))
    client = MlflowClient(tracking.tracking_uri())
    parent = tracking.create_sweep_run(client, "kgbench", "s1", "transport=http,direct")
    experiment = tracking.ensure_experiment(client, "kgbench")
    assert client.get_experiment(experiment).artifact_location == str(tmp_path / "mlruns" / "kgbench")
    rates = {"http": 90.0, "direct": 100.0}
    for transport, rate in rates.items():
        job = tracking.JobRun.start(
            client,
            "kgbench",
            run_name=transport,
            sweep_id="s1",
            parent_run_id=parent,
            tags={"hydra_overrides": transport},
        )
        served = {"serve.limits.max_inflight_per_client": "512"} if transport == "http" else {}  # kgserve's only
        job.log_params({"transport": transport, "katago.nnMaxBatchSize": 8, **served})
        job.log_metrics({"req_per_s": rate, "p50_ms": float("nan"), "p99_ms": None})
        job.finish(True)
    failed = tracking.JobRun.start(client, "kgbench", run_name="bad", sweep_id="s1", parent_run_id=parent, tags={})
    failed.finish(False, "the engine binary /x does not exist\n(second line)")
    runs = summary.child_runs(client, experiment, parent)
    over = summary.overheads(runs)
    assert list(over.values()) == [pytest.approx(0.1)]
    frame = summary.sweep_table(runs)
    assert list(frame["status"]) == ["FINISHED", "FINISHED", "FAILED"]
    assert list(frame["req/s"])[:2] == [100.0, 90.0]
    assert frame["reason"].iloc[2] == "the engine binary /x does not exist (second line)"
    text = summary.format_table(frame)
    assert "direct" in text.splitlines()[1] and "p50 ms" not in text  # all-NaN columns dropped


def test_plots_are_written(tmp_path: Path) -> None:
    levels = [
        LevelSummary(c, None, 10, 1.0, 10.0 * c, 100.0, 5.0, 8.0, 9.0, 9.5, 0.0, 0, 0, {}, 3, (1.0,), True)
        for c in (4, 16)
    ]
    records = [
        RequestRecord(c, "measure", 0, 0.1 * i, 1.0 + i, 200, 100, 20, None, f"p{i}")
        for c in (4, 16)
        for i in range(20)
    ]
    paths = write_plots(levels, records, tmp_path / "plots", "t")
    assert [p.name for p in paths] == ["throughput_vs_concurrency.png", "latency_cdf.png"]
    assert all(p.stat().st_size > 1000 for p in paths)
    assert write_plots([], [], tmp_path / "none", "t") == []


def test_exit_status() -> None:
    state.reset()
    assert state.exit_status() == 0  # nothing ran (--help)
    state.record_job(False)
    assert state.exit_status() == 1
    state.record_job(True)
    assert state.exit_status() == 0
    state.set_sweep_result(total=2, succeeded=0)
    assert state.exit_status() == 1
    state.reset()


@pytest.mark.slow
def test_an_unexpected_error_becomes_a_failed_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kgbench.sweep import modes
    from kgbench.sweep.job import JobContext, run_job

    def boom(*args: object) -> float:
        raise RuntimeError("the load generator fell over\nbadly")

    monkeypatch.setenv("MLFLOW_TRACKING_URI", seeded_uri(tmp_path / "mlflow.db"))
    monkeypatch.setattr(modes, "load_mode", boom)
    outcome = run_job(composed("backend=sim"), JobContext(job_dir=tmp_path / "job", overrides=["backend=sim"]))
    assert not outcome.ok and outcome.reason == "RuntimeError: the load generator fell over badly"
    assert "Traceback" in (tmp_path / "job" / "error.txt").read_text()
    run = MlflowClient(tracking.tracking_uri()).get_run(outcome.run_id or "")
    assert run.info.status == "FAILED"
    assert run.data.tags["kgbench.failure_reason"] == outcome.reason
    assert run.data.tags["hydra_overrides"] == "backend=sim" and "mlflow.parentRunId" not in run.data.tags
