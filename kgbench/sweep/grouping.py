"""Jobs that share a TensorRT engine build run back to back (pure).

TensorRT builds (or loads from its timing cache) an engine for each batch size, precision and board-size buffer;
a grid that alternates between them pays for a build per job. ``build_key`` names what a job's build depends on,
``group_jobs`` reorders a grid's jobs so that jobs with the same key are adjacent, keeping the user's order
otherwise (groups in order of first appearance, jobs in their order within a group). Each job still starts its own
kgserve: grouping only makes the builds cheap (a warm timing cache) and visible, never shares an engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

__all__ = ["BUILD_KEYS", "build_key", "group_jobs"]

# what a TensorRT engine is built for: batch size, precision, the board-size buffer (and the backend itself)
BUILD_KEYS = (
    "nnMaxBatchSize",
    "useFP16",
    "trtUseFP16",
    "maxBoardXSizeForNNBuffer",
    "maxBoardYSizeForNNBuffer",
    "requireMaxBoardSize",
)
TRT_BACKENDS = frozenset({"trt"})

Job = TypeVar("Job")


def build_key(cfg: Mapping[str, Any]) -> str | None:
    """``trt nnMaxBatchSize=128 trtUseFP16=true``: what this job's engine build depends on; None when its backend
    builds no engine (only TensorRT does)."""
    backend = str(cfg.get("backend", ""))
    if backend not in TRT_BACKENDS:
        return None
    parts = [f"{key}={cfg[key]}" for key in BUILD_KEYS if cfg.get(key) is not None]
    return " ".join([backend, *parts])


def group_jobs(jobs: Sequence[Job], key_of: Callable[[Job], str | None]) -> list[Job]:
    """Jobs with the same key next to each other, groups in order of first appearance (a None key: a group of
    its own, where it stood)."""
    first_seen: dict[str, int] = {}
    keyed = []
    groups = 0
    for index, job in enumerate(jobs):
        key = key_of(job)
        if key is None or key not in first_seen:
            group, groups = groups, groups + 1
            if key is not None:
                first_seen[key] = group
        else:
            group = first_seen[key]
        keyed.append((group, index, job))
    return [job for _, _, job in sorted(keyed, key=lambda item: (item[0], item[1]))]
