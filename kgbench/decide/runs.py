"""Reading a kgbench sweep back from MLflow (shared by promote and report).

Schema (see the MLflow section of the project contracts): one parent run per sweep (tags
kgbench.role=sweep, kgbench.sweep_id), one child run per job (kgbench.role=job, mlflow.parentRunId).
"""

from __future__ import annotations

import dataclasses
import math
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from kgbench.decide.goodput import best_goodput
from kgbench.decide.race import fold_replicates
from kgbench.decide.selection import Candidate
from kgbench.track.reaper import reap_dead_runs
from kgbench.track.schema import (
    BACKEND,
    CONTENDED,
    CONTENTION,
    FAULTS,
    INVALID,
    INVALID_REASON,
    LOAD_GROUP,
    MODE,
    PARENT_RUN,
    PROMOTED,
    PROMOTED_SCRATCH,
    PRUNED,
    RACE_OF,
    ROLE,
    ROLE_JOB,
    ROLE_SWEEP,
    SIMULATED,
    STATUS,
    SWEEP_ID,
    SYNTHETIC_NET,
    UNSTABLE,
    tracking_uri,
)
from kgbench.track.store_errors import readable_runs
from kgbench.track.tracking import DEFAULT_EXPERIMENT, SIM_EXPERIMENT
from kgbench.track.tracking import make_client as tracking_client

__all__ = [
    "DEFAULT_EXPERIMENT",
    "EXPERIMENT_HELP",
    "SweepNotFound",
    "candidates",
    "find_sweep",
    "goodput_at",
    "job_candidates",
    "label_of",
    "make_client",
    "mark_dead_runs",
    "promoted_runs",
    "scratch_promoted_runs",
    "sweep_children",
    "sweep_id_of",
    "swept_keys",
]

EXPERIMENT_HELP = f"MLflow experiment (default: {DEFAULT_EXPERIMENT} and {SIM_EXPERIMENT}, the simulated sweeps')"
SWEPT_PARAM_PREFIXES = ("katago.", "load.", "bench.")
SWEPT_PARAMS = ("backend", "engines", "transport", "mode")
_SAFE_ID_RE = re.compile(r"^[A-Za-z0-9_.:/+-]+$")


class SweepNotFound(LookupError):
    """No sweep (parent run) or run matches what was asked for."""


def make_client(store: str | None = None) -> MlflowClient:
    """A client for the store; a local sqlite store that does not exist yet raises SweepNotFound
    (reading must not create an empty database as a side effect)."""
    uri = store or tracking_uri()
    if uri.startswith("sqlite:///"):
        db = Path(uri.removeprefix("sqlite:///"))
        if not db.exists():
            raise SweepNotFound(f"no MLflow store at {db}: run a sweep first (python -m kgbench -m ...)")
    return tracking_client(uri)


def _experiment_ids(client: MlflowClient, experiment: str | None) -> list[str]:
    """The named experiment; by default kgbench's and its simulated sweeps' (kgbench-sim), whichever exist."""
    names = [experiment] if experiment else [DEFAULT_EXPERIMENT, SIM_EXPERIMENT]
    found = [exp.experiment_id for name in names if (exp := client.get_experiment_by_name(name)) is not None]
    if not found:
        raise SweepNotFound(f"no MLflow experiment named {' or '.join(map(repr, names))} at {client.tracking_uri}")
    return found


def mark_dead_runs(client: MlflowClient, experiment: str | None, by: str) -> list[str]:
    """Mark the runs left RUNNING by a process that is gone (a sweep killed with SIGKILL) KILLED, before they are
    read (kgbench.track.reaper); one line for each."""
    try:
        ids = _experiment_ids(client, experiment)
    except SweepNotFound:
        return []
    return [f"marked run {run_id} KILLED: {reason}" for run_id, reason in reap_dead_runs(client, ids, by)]


def find_sweep(client: MlflowClient, experiment: str | None = None, sweep: str | None = None) -> Run:
    """The sweep's parent run: by kgbench.sweep_id tag or parent run id, else the latest sweep."""
    ids = _experiment_ids(client, experiment)
    query = f"tags.`{ROLE}` = '{ROLE_SWEEP}'"
    if sweep and not _SAFE_ID_RE.match(sweep):
        raise SweepNotFound(f"invalid sweep id {sweep!r}")
    if sweep:
        found = client.search_runs(ids, f"{query} and tags.`{SWEEP_ID}` = '{sweep}'", max_results=5)
        if not found:
            try:
                run = client.get_run(sweep)
            except Exception as exc:  # mlflow raises MlflowException for an unknown id
                raise SweepNotFound(f"no sweep {sweep!r} (neither a kgbench.sweep_id nor a run id)") from exc
            return run
        return sorted(found, key=lambda r: r.info.start_time or 0)[-1]
    found = client.search_runs(ids, query, order_by=["attributes.start_time DESC"], max_results=1)
    if not found:
        raise SweepNotFound(f"no sweep (parent run tagged {ROLE}={ROLE_SWEEP}) in experiment {ids}")
    return found[0]


def sweep_id_of(parent: Run) -> str:
    return parent.data.tags.get(SWEEP_ID) or parent.info.run_id


def sweep_children(client: MlflowClient, parent: Run) -> list[Run]:
    """The job runs of a sweep (children of the parent run), oldest first."""
    exp = [parent.info.experiment_id]
    runs = client.search_runs(exp, f"tags.`{PARENT_RUN}` = '{parent.info.run_id}'", max_results=5000)
    sweep_id = parent.data.tags.get(SWEEP_ID)
    if not runs and sweep_id:
        query = f"tags.`{SWEEP_ID}` = '{sweep_id}' and tags.`{ROLE}` = '{ROLE_JOB}'"
        runs = client.search_runs(exp, query, max_results=5000)
    return sorted(readable_runs(runs), key=lambda r: (r.info.start_time or 0, r.info.run_id))


def promoted_runs(client: MlflowClient, experiment_ids: Sequence[str]) -> list[Run]:
    return client.search_runs(list(experiment_ids), f"tags.`{PROMOTED}` = 'true'", max_results=1000)


def scratch_promoted_runs(client: MlflowClient, experiment_ids: Sequence[str], config_path: str) -> list[Run]:
    """The runs promoted into the scratch runtime whose config is `config_path`."""
    if not _SAFE_ID_RE.match(config_path):
        return []
    query = f"tags.`{PROMOTED_SCRATCH}` = '{config_path}'"
    return client.search_runs(list(experiment_ids), query, max_results=1000)


def swept_keys(runs: Sequence[Run]) -> list[str]:
    """Params that name the configuration (katago.*, load.*, backend, ...) and differ between runs."""
    keys: set[str] = set()
    for run in runs:
        keys.update(k for k in run.data.params if k.startswith(SWEPT_PARAM_PREFIXES) or k in SWEPT_PARAMS)
    varying = [k for k in keys if len({run.data.params.get(k) for run in runs}) > 1]
    return sorted(varying, key=lambda k: (k not in SWEPT_PARAMS, k))


def label_of(run: Run, keys: Sequence[str]) -> str:
    return " ".join(f"{k.split('.', 1)[-1]}={run.data.params.get(k, '-')}" for k in keys if k != "backend")


def _metric(run: Run, key: str) -> float | None:
    value = run.data.metrics.get(key)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def _flag(run: Run, key: str) -> bool:
    return run.data.tags.get(key, "false").strip().lower() == "true"


def candidates(runs: Sequence[Run]) -> list[Candidate]:
    """One candidate per job run; a race's replicates are folded into the run they re-measured."""
    return fold_replicates(job_candidates(runs))


def job_candidates(runs: Sequence[Run]) -> list[Candidate]:
    """One candidate per job run as recorded (a race's replicates as they are, `replicate_of` set)."""
    keys = swept_keys(runs)
    out = []
    for run in runs:
        tags = run.data.tags
        out.append(
            Candidate(
                run_id=run.info.run_id,
                status=run.info.status,
                backend=tags.get(BACKEND) or run.data.params.get("backend", ""),
                req_per_s=_metric(run, "req_per_s"),
                p50_ms=_metric(run, "p50_ms"),
                p99_ms=_metric(run, "p99_ms"),
                errors=_metric(run, "errors"),
                timeouts=_metric(run, "timeouts"),
                errors_all_levels=_metric(run, "errors_all_levels"),
                timeouts_all_levels=_metric(run, "timeouts_all_levels"),
                faults=tags.get(FAULTS, ""),
                unstable=_flag(run, UNSTABLE),
                invalid=_flag(run, INVALID),
                invalid_reason=tags.get(INVALID_REASON, ""),
                contended=_flag(run, CONTENDED),
                contention=tags.get(CONTENTION, "") if _flag(run, CONTENDED) else "",
                failed=tags.get(STATUS) == "failed",
                pruned=_flag(run, PRUNED),
                simulated=_flag(run, SIMULATED),
                synthetic=_flag(run, SYNTHETIC_NET),
                promoted=_flag(run, PROMOTED),
                label=label_of(run, keys),
                extra={"mode": tags.get(MODE) or run.data.params.get("mode", ""), "load": tags.get(LOAD_GROUP, "")},
                req_per_s_low=_metric(run, "req_per_s_ci_low"),
                req_per_s_high=_metric(run, "req_per_s_ci_high"),
                goodput_per_s=_metric(run, "goodput_per_s"),
                goodput_low=_metric(run, "goodput_ci_low"),
                goodput_high=_metric(run, "goodput_ci_high"),
                slo_ms=_metric(run, "slo_ms"),
                replicate_of=tags.get(RACE_OF, ""),
                turns_per_s=_metric(run, "turns_per_s"),
                turns_per_s_low=_metric(run, "turns_per_s_ci_low"),
                turns_per_s_high=_metric(run, "turns_per_s_ci_high"),
                traffic=run.data.params.get("load.traffic", "distinct"),
            )
        )
    return out


def goodput_at(client: MlflowClient, runs: Sequence[Run], cands: Sequence[Candidate], slo_ms: float) -> list[Candidate]:
    """The candidates with goodput counted against ``slo_ms``: a run that logged it at another objective is
    recounted from its requests.csv artifact (a run without one keeps no goodput, and is passed over)."""
    by_id = {run.info.run_id: run for run in runs}
    out = []
    for cand in cands:
        if cand.slo_ms is not None and math.isclose(cand.slo_ms, slo_ms):
            out.append(cand)
            continue
        run = by_id[cand.run_id]
        ci = None
        try:
            window_s = float(run.data.params.get("load.window_s", "nan"))
            with tempfile.TemporaryDirectory(prefix="kgbench-goodput-") as tmp:
                frame = pd.read_csv(client.download_artifacts(cand.run_id, "requests.csv", tmp))
            ci = best_goodput(frame, slo_ms, window_s) if math.isfinite(window_s) else None
        except Exception:  # MlflowException / OSError / a malformed CSV: no goodput at this objective
            ci = None
        out.append(
            dataclasses.replace(
                cand,
                goodput_per_s=ci.mean if ci else None,
                goodput_low=ci.low if ci else None,
                goodput_high=ci.high if ci else None,
                slo_ms=slo_ms,
            )
        )
    return out
