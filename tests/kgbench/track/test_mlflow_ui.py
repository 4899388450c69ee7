"""The kgbench experiment is labelled for `mlflow ui` (experiment kind, saved view), on a real sqlite store."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from mlflow.tracking import MlflowClient

from kgbench.track import mlflow_ui, tracking


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowClient]:
    """One store for the module (creating the sqlite schema takes seconds); each test its own experiment."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}")
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
