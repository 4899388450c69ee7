"""A job's short name, its MLflow run name: `cuda b128 t64x2` (backend, nnMaxBatchSize, numAnalysisThreads x
numSearchThreadsPerAnalysisThread), then what else its own overrides set, shortly (`srv4`, `direct`, `net=katrain`,
an `engine.model=` as its architecture or file stem). Short enough
for the runs table's name column; the whole override line stays in the run's `hydra_overrides` tag."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["job_name"]

_IN_BASE = {"backend", "nnMaxBatchSize", "numAnalysisThreads", "numSearchThreadsPerAnalysisThread"}
# the sweep's bookkeeping, the same for every job or not a setting of the engine: never in a name
_NOT_NAMED = {"runtime_config", "hparams_search", "experiment", "load", "threads", "batch", "cache", "mlflow", "hydra"}
_SHORT = {
    "numNNServerThreadsPerModel": "srv{}",
    "nnCacheSizePowerOfTwo": "cache2^{}",
    "engines": "{} engines",
}


def _net(model: str) -> str:
    """`engine.model=` shortly: a synthetic net's architecture, a file's name without its extension."""
    name = model.removeprefix("synthetic:").rsplit("/", 1)[-1]
    for suffix in (".bin.gz", ".txt.gz", ".bin", ".gz"):
        name = name.removesuffix(suffix)
    return name


def _value(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _extra(key: str, value: str) -> str | None:
    if key == "transport":
        return None if value == "http" else value
    if key == "mode":
        return None if value == "load" else value
    if key in _SHORT:
        return _SHORT[key].format(value)
    return f"{key}={value}"


def job_name(cfg: Mapping[str, Any], overrides: Sequence[str]) -> str:
    """`cfg`: the job's composed top-level keys; `overrides`: the job's own, as the user wrote them."""
    parts = [str(cfg.get("backend", "?"))]
    if cfg.get("nnMaxBatchSize") is not None:
        parts.append(f"b{cfg['nnMaxBatchSize']}")
    threads, search = cfg.get("numAnalysisThreads"), cfg.get("numSearchThreadsPerAnalysisThread")
    if threads is not None:
        parts.append(f"t{threads}x{search if search is not None else 1}")
    for item in overrides:
        key, sep, value = item.lstrip("+~").partition("=")
        if key == "engine.model" and sep:  # networks side by side: which one is the job's
            parts.append(_net(value.replace("\\:", ":")))
            continue
        if not sep or key in _IN_BASE or key in _NOT_NAMED or "." in key or "/" in key:
            continue
        shown = _extra(key, _value(cfg.get(key, value)))
        if shown and shown not in parts:
            parts.append(shown)
    return " ".join(parts)
