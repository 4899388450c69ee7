"""MLflow tracking for kgbench (the schema in docs/kgbench.md): a parent run per multirun, a child run per job.

The store is kgbench.track.schema.tracking_uri(): MLFLOW_TRACKING_URI when set, else
`sqlite:///<repo>/mlflow.db` with artifacts under `<repo>/mlruns`, which is what a bare `mlflow ui` in the
repository root reads. Only kgbench imports mlflow (never kgserve). Everything goes through `MlflowClient` with
explicit run ids: no fluent global "active run" state, so a failing job can never leave the next job logging into
the wrong run.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import socket
import sqlite3
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from kgbench.load.ladder import knee
from kgbench.load.types import LevelSummary, LoadResult
from kgbench.track import store_errors
from kgbench.track.mlflow_ui import label_experiment
from kgbench.track.plots import write_plots
from kgbench.track.reaper import mark_killed, owner_tags
from kgbench.track.schema import (
    FAILURE_REASON,
    GIT_COMMIT,
    HOST,
    HYDRA_OVERRIDES,
    INVALID,
    INVALID_REASON,
    LADDER_STOP,
    PARENT_RUN,
    PROMOTED,
    ROLE,
    ROLE_JOB,
    ROLE_SWEEP,
    STATUS,
    SWEEP_ID,
    UNSTABLE,
    flag,
    tracking_uri,
)
from kgserve.paths import PROJECT_ROOT

__all__ = [
    "DEFAULT_EXPERIMENT",
    "SIM_EXPERIMENT",
    "JobRun",
    "artifact_root",
    "create_sweep_run",
    "ensure_experiment",
    "experiment_for",
    "finish_run",
    "git_commit",
    "host_name",
    "make_client",
    "tidy",
    "tracking_uri",
    "turn_metrics",
    "use_configured_uri",
]

_MAX_PARAM = 6000
_BATCH = 900  # MLflow accepts up to 1000 entries per log_batch...
_BATCH_PARAMS_TAGS = 100  # ...and up to 100 params or tags
DEFAULT_EXPERIMENT = "kgbench"
SIM_EXPERIMENT = "kgbench-sim"  # sweeps whose every job ran the simulated engine: never beside real figures


def experiment_for(configured: object, simulated: bool) -> str:
    """`mlflow.experiment` when the config names one; else kgbench, or kgbench-sim for a simulated sweep."""
    if configured is not None and str(configured).strip():
        return str(configured).strip()
    return SIM_EXPERIMENT if simulated else DEFAULT_EXPERIMENT


def tidy(value: float) -> float:
    """A metric as the runs table shows it: four significant digits, never fewer than its integer part
    (173.333333 -> 173.3, 0.0123456 -> 0.01235, 12345.67 -> 12346); whole numbers unchanged. Far inside any
    measurement's noise, and the 95% intervals are logged beside the figures they bound."""
    if value == 0 or not math.isfinite(value) or float(value).is_integer():
        return value
    return round(value, max(0, 3 - math.floor(math.log10(abs(value)))))


def use_configured_uri(uri: object) -> None:
    """`mlflow.tracking_uri` of the Hydra config (e.g. an `mlflow server` every node reaches) wins over
    MLFLOW_TRACKING_URI; null leaves it as it is."""
    if uri is not None and str(uri).strip():
        os.environ["MLFLOW_TRACKING_URI"] = str(uri).strip()


def artifact_root(uri: str) -> Path | None:
    """Artifacts of a local sqlite store live next to the database, in mlruns/ (None: the store decides)."""
    if uri.startswith("sqlite:///"):
        return Path(uri.removeprefix("sqlite:///")).expanduser().resolve().parent / "mlruns"
    return None


_opened: set[str] = set()  # stores this process has opened (and MLflow has created or migrated)


def make_client(uri: str | None = None) -> MlflowClient:
    """A client of the store at `uri` (default: tracking_uri()), ready to use: MLflow's HTTP retries bounded to
    seconds and a server's port checked first; a sqlite store created or migrated under its lock the first time
    (kgbench.track.store_errors). A store that cannot be used raises StoreError, its one line."""
    uri = uri or tracking_uri()
    store_errors.bound_http()
    try:
        store_errors.probe(uri)
        if uri in _opened:
            return MlflowClient(tracking_uri=uri)
        with store_errors.sqlite_init_lock(uri):  # MLflow creates and migrates a new store as the client is made
            client = MlflowClient(tracking_uri=uri)
            client.search_experiments(max_results=1)
        _opened.add(uri)
    except Exception as exc:
        if (error := store_errors.store_error(exc, uri)) is not None:
            raise error from exc
        raise
    return client


def ensure_experiment(client: MlflowClient, name: str) -> str:
    """The experiment's id, creating it (artifacts under mlruns/<name>) when it does not exist yet.
    The folder is named after the experiment, never its numeric id: `mlflow ui` falls back to the old file
    store when mlruns/ holds a numeric folder with a meta.yaml, and must keep reading mlflow.db."""
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        root = artifact_root(tracking_uri())
        location = None
        if root is not None:
            location = str(root / (re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "experiment"))
        try:
            experiment = client.get_experiment(client.create_experiment(name, artifact_location=location))
        except MlflowException:  # created meanwhile by another process
            experiment = client.get_experiment_by_name(name)
            if experiment is None:
                raise
    label_experiment(client, experiment)  # `mlflow ui` shows it as model training, with kgbench's view
    return str(experiment.experiment_id)


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(PROJECT_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "-C", str(PROJECT_ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if out.returncode != 0:
        return "unknown"
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def host_name() -> str:
    return socket.gethostname()


def create_sweep_run(
    client: MlflowClient, experiment: str, sweep_id: str, overrides: str, tags: Mapping[str, str] | None = None
) -> str:
    """The parent run of one multirun; stays RUNNING until `finish_run`."""
    experiment_id = ensure_experiment(client, experiment)
    run = client.create_run(
        experiment_id,
        run_name=f"sweep {sweep_id}",
        tags={
            ROLE: ROLE_SWEEP,
            SWEEP_ID: sweep_id,
            HYDRA_OVERRIDES: overrides,
            HOST: host_name(),
            GIT_COMMIT: git_commit(),
            **owner_tags(),  # a sweep killed with SIGKILL is found by its gone owner (kgbench.track.reaper)
            **(tags or {}),
        },
    )
    return str(run.info.run_id)


def finish_run(client: MlflowClient, run_id: str, ok: bool) -> None:
    """The run ended FINISHED or FAILED. A sqlite store on a full disk refuses MLflow's write (its journal needs
    space): the run's status is then changed in place (`_end_in_place`), so that it does not stay RUNNING for good."""
    status = "FINISHED" if ok else "FAILED"
    try:
        client.set_terminated(run_id, status)
    except Exception as exc:
        if not _end_in_place(str(client.tracking_uri), run_id, status, exc):
            raise


def _end_in_place(uri: str, run_id: str, status: str, exc: BaseException) -> bool:
    """One row's status and end time rewritten in the pages the database already has, its journal in memory: no new
    space needed (MLflow's own write journals to a file, which a full disk refuses). Only for a full disk's
    sqlite store; False when it does not apply or fails too."""
    db = store_errors.sqlite_path(uri)
    if db is None or not (store_errors.describe(exc) or "").startswith("the disk is full"):
        return False
    try:
        with contextlib.closing(sqlite3.connect(db, timeout=10)) as conn:
            conn.execute("PRAGMA journal_mode=MEMORY")
            done = conn.execute(
                "UPDATE runs SET status = ?, end_time = ? WHERE run_uuid = ? AND status = 'RUNNING'",
                (status, int(time.time() * 1000), run_id),
            )
            conn.commit()
            return done.rowcount == 1
    except sqlite3.Error:
        return False


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


class JobRun:
    """One child run: params, tags, metrics (skipping None/NaN: absent, never a fake zero), artifacts."""

    def __init__(self, client: MlflowClient, run_id: str) -> None:
        self.client = client
        self.run_id = run_id

    @classmethod
    def start(
        cls,
        client: MlflowClient,
        experiment: str,
        *,
        run_name: str,
        sweep_id: str | None,
        parent_run_id: str | None,
        tags: Mapping[str, str],
    ) -> JobRun:
        all_tags = {ROLE: ROLE_JOB, PROMOTED: flag(False), **owner_tags(), **tags}
        if sweep_id:
            all_tags[SWEEP_ID] = sweep_id
        if parent_run_id:
            all_tags[PARENT_RUN] = parent_run_id
        run = client.create_run(ensure_experiment(client, experiment), run_name=run_name, tags=all_tags)
        return cls(client, str(run.info.run_id))

    def log_params(self, params: Mapping[str, Any]) -> None:
        items = [Param(str(k), str(v)[:_MAX_PARAM]) for k, v in params.items()]
        for i in range(0, len(items), _BATCH_PARAMS_TAGS):
            self.client.log_batch(self.run_id, params=items[i : i + _BATCH_PARAMS_TAGS])

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        items = [RunTag(str(k), str(v)) for k, v in tags.items() if v is not None]
        for i in range(0, len(items), _BATCH_PARAMS_TAGS):
            self.client.log_batch(self.run_id, tags=items[i : i + _BATCH_PARAMS_TAGS])

    def log_metrics(self, metrics: Mapping[str, Any], step: int = 0) -> None:
        self.log_metric_points([(k, v, step) for k, v in metrics.items()])

    def log_metric_points(self, points: list[tuple[str, Any, int]]) -> None:
        """(name, value, step) triples; a series shares its name across steps."""
        now = int(time.time() * 1000)
        items = [
            Metric(name, tidy(val), now, step) for name, value, step in points if (val := _finite(value)) is not None
        ]
        for i in range(0, len(items), _BATCH):
            self.client.log_batch(self.run_id, metrics=items[i : i + _BATCH])

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        if Path(path).exists():
            self.client.log_artifact(self.run_id, str(path), artifact_path)

    def finish(self, ok: bool, reason: str | None = None) -> None:
        tags = {STATUS: "ok" if ok else "failed"}
        if reason:
            tags[FAILURE_REASON] = " ".join(reason.split())[:5000]
        self.set_tags(tags)
        finish_run(self.client, self.run_id, ok)

    def kill(self, reason: str) -> None:
        """End the run as KILLED: stopped before its end (a signal), the reason in kgbench.failure_reason."""
        mark_killed(self.client, self.run_id, reason)


def turn_metrics(level: LevelSummary) -> dict[str, float]:
    """The headline level's figures in analysed turns (every traffic kind; distinct: one turn a request), and per
    kind for mixed traffic (``review_turns_per_s``, ``interactive_p99_ms``, ...)."""
    out = {
        "turns_per_s": level.turns_per_s,
        "turns_per_s_ci_low": level.turns_per_s_low,
        "turns_per_s_ci_high": level.turns_per_s_high,
        "turn_p50_ms": level.turn_p50_ms,
        "turn_p99_ms": level.turn_p99_ms,
    }
    for kind, figures in level.by_kind.items():
        out.update({f"{kind}_{name}": value for name, value in figures.items()})
    return out


def log_load_result(run: JobRun, result: LoadResult, extra: dict[str, float], job_dir: Path, title: str) -> None:
    """A load result into the job's run: metrics (headline = the level with the highest req/s), per-level series,
    tags, the per-request CSV and the plots."""
    head = result.headline()
    metrics: dict[str, Any] = dict(extra)
    metrics["position_repeat_rate"] = result.position_repeat_rate
    if head is not None:
        for name in ("req_per_s", "visits_per_s", "p50_ms", "p90_ms", "p99_ms", "max_ms", "error_rate", "errors"):
            metrics[name] = getattr(head, name)
        metrics["timeouts"] = head.timeouts
        metrics["headline_concurrency"] = head.concurrency
        metrics["req_per_s_ci_low"] = head.req_per_s_low
        metrics["req_per_s_ci_high"] = head.req_per_s_high
        metrics.update(turn_metrics(head))
    good = result.goodput_headline()
    if good is not None:
        metrics.update(
            goodput_per_s=good.goodput_per_s,
            goodput_ci_low=good.goodput_low,
            goodput_ci_high=good.goodput_high,
            goodput_concurrency=good.concurrency,
            slo_ms=good.slo_ms,
        )
    # every level's errors, not only the headline's: an engine crash in the first level must not hide behind a
    # clean second one (promote refuses a run with any: kgbench.decide.selection)
    metrics["errors_all_levels"] = sum(level.errors for level in result.levels)
    metrics["timeouts_all_levels"] = sum(level.timeouts for level in result.levels)
    metrics["knee_concurrency"] = knee(result.levels)
    metrics["turns_total"] = result.turns_total
    metrics["visits_total"] = result.visits_total
    if result.selfwatch is not None:
        metrics["loadgen_loop_lag_p99_ms"] = result.selfwatch.loop_lag_p99_ms
        metrics["loadgen_cpu_share"] = result.selfwatch.cpu_share
    run.log_metrics(metrics)
    points: list[tuple[str, Any, int]] = []
    for level in result.levels:
        for name in ("req_per_s", "turns_per_s", "p50_ms", "p99_ms", "error_rate", "errors", "goodput_per_s"):
            points.append((f"level_{name}", getattr(level, name), level.concurrency))
        points.append(("level_req_per_s_ci_low", level.req_per_s_low, level.concurrency))
        points.append(("level_req_per_s_ci_high", level.req_per_s_high, level.concurrency))
    run.log_metric_points(points)
    run.set_tags(
        {
            LADDER_STOP: result.stop_reason or "",
            UNSTABLE: flag(result.unstable),
            INVALID: flag(result.invalid),
            INVALID_REASON: result.invalid_reason or "",
        }
    )
    csv_path = job_dir / "requests.csv"
    result.write_csv(str(csv_path))
    run.log_artifact(csv_path)
    for plot in write_plots(result.levels, result.records, job_dir / "plots", title):
        run.log_artifact(plot, "plots")
