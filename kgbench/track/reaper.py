"""Runs left RUNNING by a process that is gone: marked KILLED with the reason, by whoever looks next.

Every run kgbench opens (a sweep's parent, a job) carries its owner (kgbench.owner: host, pid, process start
time) as tags. A sweep killed with SIGKILL (or its node lost) runs no handler and leaves its runs RUNNING; the next
sweep (kgbench.sweep.callbacks.open_sweep), promote and report call `reap_dead_runs`, which marks each RUNNING run
whose owner is known gone KILLED (kgbench.status killed, kgbench.failure_reason why). A run on another host is left
as it is (its process cannot be looked up from here), and so is a run with no owner tags (from a kgbench before
them): nothing is marked on a guess.

A run stopped while its owner lives (SIGTERM, Ctrl-C: kgbench.sweep.interrupt) is marked by that owner with
`mark_killed`, with the signal as its reason.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from kgbench.owner import Owner
from kgbench.track.schema import FAILURE_REASON, OWNER_HOST, OWNER_PID, OWNER_STARTED, STATUS

__all__ = ["KILLED", "dead_owner", "mark_killed", "owner_tags", "reap_dead_runs"]

KILLED = "killed"  # kgbench.status of a run stopped before its end


def owner_tags(owner: Owner | None = None) -> dict[str, str]:
    """The tags that name the process running a run (this one by default)."""
    owner = owner or Owner.me()
    return {OWNER_HOST: owner.host, OWNER_PID: str(owner.pid), OWNER_STARTED: f"{owner.started:.3f}"}


def dead_owner(run: Run) -> Owner | None:
    """The run's owner when it is known gone (same host, no such process or a later one with its pid), else None."""
    tags = run.data.tags
    owner = Owner.of({"host": tags.get(OWNER_HOST), "pid": tags.get(OWNER_PID), "started": tags.get(OWNER_STARTED)})
    if owner is None or tags.get(OWNER_HOST) is None:
        return None
    return owner if owner.gone() is True else None


def mark_killed(client: MlflowClient, run_id: str, reason: str) -> None:
    """End a run as KILLED, its reason in kgbench.failure_reason."""
    client.set_tag(run_id, STATUS, KILLED)
    client.set_tag(run_id, FAILURE_REASON, " ".join(reason.split())[:5000])
    client.set_terminated(run_id, "KILLED")


def reap_dead_runs(client: MlflowClient, experiment_ids: Sequence[str], by: str) -> list[tuple[str, str]]:
    """Mark every RUNNING run of these experiments whose owner is gone KILLED; (run id, reason) of each. `by`: who
    marks them (`the next sweep`, `promote`, `report`), for the reason."""
    if not experiment_ids:
        return []
    reaped = []
    running = client.search_runs(list(experiment_ids), "attributes.status = 'RUNNING'", max_results=5000)
    for run in running:
        if run.info.status != "RUNNING" or (owner := dead_owner(run)) is None:
            continue
        reason = (
            f"its process ({owner.describe()}) was gone while the run was still RUNNING: killed without a chance to "
            f"end it (SIGKILL, out of memory, the node lost); marked by {by}"
        )
        mark_killed(client, run.info.run_id, reason)
        reaped.append((run.info.run_id, reason))
    return reaped
