"""The end of a sweep, read back from MLflow: the serving layer's overhead for http runs that have a direct
twin, the table of every job sorted by req/s (best first), and the line that counts the contended jobs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd
from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from kgbench.targets.serving import PARAM_PREFIX as SERVING_PARAM_PREFIX
from kgbench.track.record import CFG_SHA256_PARAM, RECORD_SHA256_PARAM
from kgbench.track.schema import (
    BOTTLENECK,
    CONTENDED,
    CONTENTION,
    CONTENTION_ATTEMPTS,
    FAILURE_REASON,
    HYDRA_OVERRIDES,
    INVALID_REASON,
    PARENT_RUN,
    RACE_ROUND,
    SYNTHETIC_NET,
)
from kgbench.track.store_errors import readable_runs

__all__ = ["COLUMNS", "child_runs", "contended_line", "format_table", "overheads", "skipped_text", "sweep_table"]

# (column, metric)
COLUMNS: list[tuple[str, str]] = [
    ("req/s", "req_per_s"),
    ("turns/s", "turns_per_s"),  # analysed turns (distinct traffic: one a request; a review: its game's)
    ("visits/s", "visits_per_s"),
    ("p50 ms", "p50_ms"),
    ("p99 ms", "p99_ms"),
    ("errors", "error_rate"),
    ("batch", "nn_avg_batch_size"),
    ("rows/visit", "nn_rows_per_visit"),  # the engine's NN rows over the visits it answered: below 1, the cache's
    ("start s", "engine_start_s"),
    ("overhead", "overhead"),
    # efficiency over the headline level's windows (kgbench.track.efficiency); absent without a GPU or a known net
    ("evals/s", "nn_evals_per_s"),
    ("MFU", "mfu"),
    ("J/an", "gpu_j_per_analysis"),
    ("GPU %", "windows_gpu_util_mean"),
    ("host %", "host_cpu_busy_pct"),
]


def child_runs(client: MlflowClient, experiment_id: str, parent_run_id: str) -> list[Run]:
    """The sweep's job runs; one whose metrics are not numbers is skipped with its reason (store_errors)."""
    return readable_runs(
        client.search_runs([experiment_id], f"tags.`{PARENT_RUN}` = '{parent_run_id}'", max_results=5000)
    )


def _served(param: str) -> bool:
    """kgserve's serving settings, and the digests of the job's record and cfg artifacts (the record names its
    transport and serving; the cfg its job's own folders): what a direct job and its http twin differ in besides
    the transport."""
    return param.startswith(SERVING_PARAM_PREFIX) or param in (RECORD_SHA256_PARAM, CFG_SHA256_PARAM)


def overheads(runs: list[Run]) -> dict[str, float]:
    """run id of an http run -> 1 - req/s(http) / req/s(direct twin: same params but transport), when both ran."""
    direct: dict[tuple[tuple[str, str], ...], float] = {}
    http: list[tuple[tuple[tuple[str, str], ...], str, float]] = []
    for run in runs:
        req = run.data.metrics.get("req_per_s")
        if run.info.status != "FINISHED" or req is None:
            continue
        # the twins differ in transport and in kgserve's serving settings (a direct job has no front end)
        key = tuple(sorted((k, v) for k, v in run.data.params.items() if k != "transport" and not _served(k)))
        if run.data.params.get("transport") == "direct":
            direct[key] = req
        elif run.data.params.get("transport") == "http":
            http.append((key, run.info.run_id, req))
    return {run_id: 1.0 - req / direct[key] for key, run_id, req in http if direct.get(key, 0) > 0}


def sweep_table(runs: list[Run]) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for run in runs:
        tags, metrics = run.data.tags, run.data.metrics
        row: dict[str, Any] = {  # the job's short name (its run's), else its overrides
            "job": run.info.run_name or tags.get(HYDRA_OVERRIDES) or run.info.run_id,
            "status": run.info.status,
        }
        for column, key in COLUMNS:
            row[column] = metrics.get(key, math.nan)
        row["bottleneck"] = tags.get(BOTTLENECK, "")
        flags = [name for name in ("unstable", "invalid") if tags.get(f"kgbench.{name}") == "true"]
        flags += ["synthetic"] if tags.get(SYNTHETIC_NET) == "true" else []
        flags += ["CONTENDED"] if tags.get(CONTENDED) == "true" else []
        flags += [f"race round {tags[RACE_ROUND]}"] if tags.get(RACE_ROUND) else []
        row["flags"] = ",".join(flags)
        contention = tags.get(CONTENTION, "") if tags.get(CONTENDED) == "true" else ""
        row["reason"] = tags.get(FAILURE_REASON, "") or tags.get(INVALID_REASON, "") or contention
        row["run_id"] = run.info.run_id
        row["_start"] = run.info.start_time or 0
        rows.append(row)
    columns = ["job", "status", *[c for c, _ in COLUMNS], "bottleneck", "flags", "reason", "run_id", "_start"]
    frame = pd.DataFrame(rows, columns=columns).sort_values("_start", kind="stable")
    # mode=engine jobs have no req/s: they sort by visits/s after the load jobs; traffic whose requests are not one
    # turn each (a review's is a game) sorts by analysed turns/s, the rule's objective then
    by = "turns/s" if any(run.data.params.get("load.traffic", "distinct") != "distinct" for run in runs) else "req/s"
    frame = frame.sort_values([by, "visits/s"], ascending=False, na_position="last", kind="stable")
    frame = frame.drop(columns=["_start"]).reset_index(drop=True)
    frame.attrs["sorted_by"] = by
    return frame


def format_table(frame: pd.DataFrame, max_reason: int = 100) -> str:
    if frame.empty:
        return "(no jobs)"
    shown = frame.drop(columns=["run_id"]).copy()
    shown["reason"] = shown["reason"].map(
        lambda text: text if len(text) <= max_reason else text[: max_reason - 1] + "…"
    )
    shown = shown.dropna(axis=1, how="all")
    if (shown["bottleneck"] == "").all():  # no job measured its machine (engine mode, old runs)
        shown = shown.drop(columns=["bottleneck"])
    with pd.option_context("display.width", 250, "display.max_columns", 50, "display.max_colwidth", max_reason):
        return shown.to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="-")


def skipped_text(skipped: Sequence[tuple[str, str]]) -> str:
    """`backend=trt nnMaxBatchSize=64, backend=trt nnMaxBatchSize=128: <why>`: the jobs a preflight left out, by
    reason."""
    by_reason: dict[str, list[str]] = {}
    for job, why in skipped:
        by_reason.setdefault(why, []).append(job)
    return "; ".join(f"{', '.join(jobs)}: {why}" for why, jobs in by_reason.items())


def contended_line(runs: list[Run]) -> str:
    """The sweep's last line: how many of its jobs were contended, how many of those a re-measure cleared, and how
    many stayed so (kept, marked, set aside by promote)."""
    measured = [run for run in runs if CONTENDED in run.data.tags]
    marked = [run for run in measured if run.data.tags[CONTENDED] == "true"]
    cleared = [
        run
        for run in measured
        if run.data.tags[CONTENDED] != "true" and "contended (" in run.data.tags.get(CONTENTION_ATTEMPTS, "")
    ]
    if not marked and not cleared:
        return f"kgbench: contended jobs: 0 of {len(measured)}"
    return (
        f"kgbench: contended jobs: {len(marked) + len(cleared)} of {len(measured)} "
        f"({len(cleared)} clean when re-measured; {len(marked)} still contended, kept but marked, "
        "never promoted: kgbench.contended=true)"
    )
