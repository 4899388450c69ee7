"""The end-of-sweep table: every job of a sweep, read back from MLflow, sorted by req/s (best first)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from mlflow.tracking import MlflowClient

__all__ = ["COLUMNS", "format_table", "sweep_table"]

# (column, where, key): where is "metric" or "tag"
COLUMNS: list[tuple[str, str, str]] = [
    ("req/s", "metric", "req_per_s"),
    ("visits/s", "metric", "visits_per_s"),
    ("p50 ms", "metric", "p50_ms"),
    ("p99 ms", "metric", "p99_ms"),
    ("errors", "metric", "error_rate"),
    ("batch", "metric", "nn_avg_batch_size"),
    ("start s", "metric", "engine_start_s"),
]


def sweep_table(client: MlflowClient, experiment_id: str, parent_run_id: str) -> pd.DataFrame:
    runs = client.search_runs([experiment_id], f"tags.`mlflow.parentRunId` = '{parent_run_id}'", max_results=5000)
    rows: list[dict[str, Any]] = []
    for run in runs:
        tags, metrics = run.data.tags, run.data.metrics
        row: dict[str, Any] = {
            "job": tags.get("hydra_overrides", run.info.run_name or run.info.run_id),
            "status": run.info.status,
        }
        for column, _, key in COLUMNS:
            row[column] = metrics.get(key, math.nan)
        flags = [name for name in ("unstable", "invalid") if tags.get(f"kgbench.{name}") == "true"]
        row["flags"] = ",".join(flags)
        row["reason"] = tags.get("kgbench.failure_reason", "") or tags.get("kgbench.invalid_reason", "")
        row["run_id"] = run.info.run_id
        row["_start"] = run.info.start_time or 0
        rows.append(row)
    columns = ["job", "status", *[c for c, _, _ in COLUMNS], "flags", "reason", "run_id", "_start"]
    frame = pd.DataFrame(rows, columns=columns).sort_values("_start", kind="stable")
    frame = frame.sort_values("req/s", ascending=False, na_position="last", kind="stable")
    return frame.drop(columns=["_start"]).reset_index(drop=True)


def format_table(frame: pd.DataFrame, max_reason: int = 100) -> str:
    if frame.empty:
        return "(no jobs)"
    shown = frame.drop(columns=["run_id"]).copy()
    shown["reason"] = shown["reason"].map(
        lambda text: text if len(text) <= max_reason else text[: max_reason - 1] + "…"
    )
    shown = shown.dropna(axis=1, how="all")
    with pd.option_context("display.width", 250, "display.max_columns", 50, "display.max_colwidth", max_reason):
        return shown.to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="-")
