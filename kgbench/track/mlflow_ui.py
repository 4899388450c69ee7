"""How the kgbench experiment shows in `mlflow ui` (MLflow 3): as model training runs, with a saved view.

- `mlflow.experimentKind = custom_model_development`: the experiment tag MLflow 3's UI reads to tell a
  model-training experiment from a GenAI one (the values are those of the UI bundle's ExperimentKind
  enum; `genai_development` is the GenAI one). MLflow 3.17's UI decides what a page shows from a
  per-browser "workflow type" switch when its feature flag is on (it is in 3.17.2); the tag is what the
  UI's own "experiment type" setting writes and what builds without the flag read, so it is set anyway.
- A saved view (`mlflow.sharedViewState.<id>`: an envelope `{name, createdAt, updatedAt, state}` whose
  state is the runs table's JSON state): the sweep's job runs, best req/s first, with the throughput,
  latency and batching metrics and the swept parameters as columns. It is written once; a user who
  changes it in the UI keeps the change.

`runs_url` is the address that opens the runs table with that view in the model-training layout.
"""

from __future__ import annotations

import json
import time
from urllib.parse import urlencode

from mlflow.entities import Experiment
from mlflow.tracking import MlflowClient

from kgbench.track.schema import PROMOTED, ROLE, ROLE_JOB, SIMULATED, UNSTABLE

__all__ = [
    "EXPERIMENT_KIND",
    "EXPERIMENT_KIND_TAG",
    "VIEW_ID",
    "VIEW_TAG",
    "label_experiment",
    "runs_url",
    "view_state",
]

EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
VIEW_ID = "kgbench-jobs-v1"  # a new id when the columns change, so an edited older view is never overwritten
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_ID}"
VIEW_NAME = "kgbench: jobs by req/s"
METRIC_COLUMNS = ("req_per_s", "p50_ms", "p99_ms", "errors", "visits_per_s", "nn_avg_batch_size", "engine_start_s")
PARAM_COLUMNS = (
    "backend",
    "engines",
    "katago.nnMaxBatchSize",
    "katago.numAnalysisThreads",
    "katago.numSearchThreadsPerAnalysisThread",
    "katago.nnCacheSizePowerOfTwo",
)
TAG_COLUMNS = (SIMULATED, PROMOTED, UNSTABLE)
LOCAL_UI = "http://127.0.0.1:5000"  # where a plain `mlflow ui` listens


def _column(kind: str, name: str) -> str:
    return f"{kind}.`{name}`"  # the runs table's column key (MLflow's makeCanonicalSortKey)


def view_state() -> dict[str, object]:
    """The runs table state of the saved view (MLflow merges it over its defaults when the view opens)."""
    return {
        "searchFilter": f"tags.`{ROLE}` = '{ROLE_JOB}'",
        "orderByKey": _column("metrics", "req_per_s"),
        "orderByAsc": False,
        "selectedColumns": [
            *(_column("metrics", name) for name in METRIC_COLUMNS),
            *(_column("params", name) for name in PARAM_COLUMNS),
            *(_column("tags", name) for name in TAG_COLUMNS),
        ],
    }


def _view_envelope(now_ms: int) -> str:
    state = json.dumps(view_state(), separators=(",", ":"))
    return json.dumps({"name": VIEW_NAME, "createdAt": now_ms, "updatedAt": now_ms, "state": state})


def label_experiment(client: MlflowClient, experiment: Experiment) -> None:
    """Set the experiment-kind tag (also on an experiment made before kgbench set it) and add the saved
    view when it is missing. Tags already in place are not written again."""
    tags = experiment.tags or {}
    experiment_id = experiment.experiment_id
    if tags.get(EXPERIMENT_KIND_TAG) != EXPERIMENT_KIND:
        client.set_experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    if VIEW_TAG not in tags:
        client.set_experiment_tag(experiment_id, VIEW_TAG, _view_envelope(int(time.time() * 1000)))


def runs_url(experiment_id: str, tracking_uri: str = "") -> str:
    """The experiment's runs table in the model-training layout with kgbench's saved view: on the tracking
    server itself when the store is one (http/https), else on a local `mlflow ui` (its default address)."""
    base = tracking_uri if tracking_uri.startswith(("http://", "https://")) else LOCAL_UI
    query = urlencode({"workflowType": "machine_learning", "viewStateShareKey": VIEW_ID})
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?{query}"
