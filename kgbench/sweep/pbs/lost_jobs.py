"""A job whose process is gone (preempted, killed, walltime, node failure) cannot mark its own MLflow run: the
launcher does it here. The job's run is found by its `kgbench.job_key` tag; a job lost before it created its
run gets a FAILED run of its own, so every launched job is one run of the sweep either way."""

from __future__ import annotations

from collections.abc import Mapping

from mlflow.tracking import MlflowClient

from kgbench.track import tracking
from kgbench.track.schema import JOB_KEY

__all__ = ["record_lost_job"]


def record_lost_job(
    client: MlflowClient,
    experiment: str,
    *,
    job_key: str,
    label: str,
    reason: str,
    sweep_id: str | None,
    parent_run_id: str | None,
    tags: Mapping[str, str],
) -> str:
    """Mark the job's unfinished run FAILED with `reason` (or create a FAILED run); returns the run id."""
    experiment_id = tracking.ensure_experiment(client, experiment)
    found = client.search_runs([experiment_id], filter_string=f"tags.`{JOB_KEY}` = '{job_key}'", max_results=5)
    for run in found:
        if run.info.status in ("RUNNING", "SCHEDULED"):
            tracking.JobRun(client, run.info.run_id).finish(False, reason)
    if found:
        return str(found[0].info.run_id)
    job_run = tracking.JobRun.start(
        client,
        experiment,
        run_name=label,
        sweep_id=sweep_id,
        parent_run_id=parent_run_id,
        tags={**tags, JOB_KEY: job_key},
    )
    job_run.finish(False, reason)
    return job_run.run_id
