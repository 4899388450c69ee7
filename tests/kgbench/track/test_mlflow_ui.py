"""What `mlflow ui` shows of kgbench: the experiment labelled (experiment kind, saved view) on a real sqlite store,
short run names, metrics to four significant digits, and no deprecation warning from MLflow's own server."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator

import pytest
from mlflow.tracking import MlflowClient

from kgbench.track import mlflow_ui, tracking
from kgbench.track.naming import job_name
from kgbench.track.tracking import tidy
from tests.helpers.mlflow_store import seeded_uri


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowClient]:
    """One store for the module (creating the sqlite schema takes seconds); each test its own experiment."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", seeded_uri(tmp_path_factory.mktemp("mlflow") / "mlflow.db"))
        yield tracking.make_client()


def _saved_view(tags: dict[str, str]) -> dict[str, object]:
    envelope = json.loads(tags[mlflow_ui.VIEW_TAG])
    assert envelope["name"] == mlflow_ui.VIEW_NAME
    assert isinstance(envelope["createdAt"], int) and isinstance(envelope["state"], str)
    state: dict[str, object] = json.loads(envelope["state"])
    return state


def test_new_experiment_opens_as_model_training_with_the_saved_view(client: MlflowClient) -> None:
    experiment_id = tracking.ensure_experiment(client, "kgbench")
    tags = client.get_experiment(experiment_id).tags
    assert tags["mlflow.experimentKind"] == "custom_model_development"
    state = _saved_view(tags)
    columns = state["selectedColumns"]
    assert isinstance(columns, list)
    for column in ("metrics.`req_per_s`", "metrics.`p99_ms`", "params.`katago.nnMaxBatchSize`"):
        assert column in columns
    assert state["orderByKey"] == "metrics.`req_per_s`" and state["orderByAsc"] is False
    assert state["searchFilter"] == "tags.`kgbench.role` = 'job'"
    # the filter is one MLflow's own search accepts
    client.search_runs([experiment_id], str(state["searchFilter"]))
    assert tracking.ensure_experiment(client, "kgbench") == experiment_id


def test_existing_experiment_gets_the_tag_and_keeps_an_edited_view(client: MlflowClient) -> None:
    experiment_id = client.create_experiment("older")  # made before kgbench labelled experiments
    edited = json.dumps({"name": "mine", "createdAt": 1, "updatedAt": 2, "state": "{}"})
    client.set_experiment_tag(experiment_id, mlflow_ui.VIEW_TAG, edited)
    client.set_experiment_tag(experiment_id, "mlflow.experimentKind", "genai_development")
    assert tracking.ensure_experiment(client, "older") == experiment_id
    tags = client.get_experiment(experiment_id).tags
    assert tags["mlflow.experimentKind"] == "custom_model_development"
    assert tags[mlflow_ui.VIEW_TAG] == edited


def test_runs_url() -> None:
    url = mlflow_ui.runs_url("7", "sqlite:///x/mlflow.db")
    assert url == (
        "http://127.0.0.1:5000/#/experiments/7/runs?workflowType=machine_learning&viewStateShareKey=kgbench-jobs-v1"
    )
    assert mlflow_ui.runs_url("7", "https://mlflow.example.invalid/").startswith("https://mlflow.example.invalid/#/")


def test_run_names_are_short_and_say_what_differs() -> None:
    cfg = {"backend": "cuda", "nnMaxBatchSize": 128, "numAnalysisThreads": 64, "numSearchThreadsPerAnalysisThread": 2}
    assert job_name(cfg, ["backend=cuda", "++nnMaxBatchSize=128", "load=smoke"]) == "cuda b128 t64x2"
    more = {**cfg, "numNNServerThreadsPerModel": 4, "transport": "direct", "engines": 2}
    overrides = ["++numNNServerThreadsPerModel=4", "transport=direct", "engines=2", "runtime_config=/x.yaml"]
    assert job_name(more, overrides) == "cuda b128 t64x2 srv4 direct 2 engines"
    # networks side by side: the net group's name, or engine.model's architecture or file stem
    assert job_name(cfg, ["net=synthetic-b11c768"]) == "cuda b128 t64x2 net=synthetic-b11c768"
    assert job_name(cfg, ["engine.model=synthetic\\:b2c32nbt"]) == "cuda b128 t64x2 b2c32nbt"
    assert job_name(cfg, ["engine.model=/nets/kata1-tf3-b11c768-s11001M-d5973M.bin.gz"]).endswith(
        " kata1-tf3-b11c768-s11001M-d5973M"
    )
    assert job_name({"backend": "sim"}, ["++useFP16=false"]) == "sim useFP16=false"


def test_metrics_are_logged_to_four_significant_digits() -> None:
    assert tidy(173.333333) == 173.3 and tidy(0.0123456) == 0.01235 and tidy(12345.678) == 12346.0
    assert tidy(8.0) == 8.0 and tidy(123456.0) == 123456.0 and tidy(0.0) == 0.0 and math.isnan(tidy(math.nan))


@pytest.mark.slow
def test_mlflow_ui_prints_no_deprecation_warning() -> None:
    """kgbench's MLflow plugin (kgbench.track.mlflow_plugin) silences the one warning MLflow's server prints per worker
    (its own use of starlette's deprecated WSGI middleware) when the server's module is imported as `mlflow ui` does."""
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", "import mlflow.server.fastapi_app"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "starlette.middleware.wsgi is deprecated" not in done.stderr
