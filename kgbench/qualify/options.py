"""What a node qualification is asked to do: the KataGo build, the network, the time budget and the scale."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SCALES", "QualifyOptions", "Scale", "parse_budget"]


@dataclass(frozen=True)
class Scale:
    """How big each measurement is. `gpu` is sized for a b40c768nbt on one GPU in ~8 minutes; `rehearsal` runs the
    whole workflow on a CPU build with a tiny net in a few minutes (CI)."""

    name: str
    bench_threads: tuple[int, ...]  # `katago benchmark -t`
    bench_visits: int
    bench_positions: int
    line_batches: tuple[int, ...]  # the user's line: nnMaxBatchSize=64,128,256
    threads: dict[str, int]  # numAnalysisThreads, numSearchThreadsPerAnalysisThread, numNNServerThreadsPerModel
    load: dict[str, object]  # kgbench load.* overrides of every sweep job
    wide_jobs: int  # most jobs of the wider sweep
    pipe_visits: int  # the 100-visit comparison
    pipe_queries: int  # per engine-pipe phase (the first concurrency answers are warm-up)
    pipe_policy_queries: int


SCALES = {
    "gpu": Scale(
        name="gpu",
        bench_threads=(32, 128, 256),
        bench_visits=400,
        bench_positions=5,
        line_batches=(64, 128, 256),
        threads={"numAnalysisThreads": 64, "numSearchThreadsPerAnalysisThread": 4, "numNNServerThreadsPerModel": 2},
        load={
            "concurrency": [256],
            "warmup_s": 5.0,
            "window_s": 3.0,
            "min_windows": 2,
            "max_windows": 4,
            "tolerance": 0.1,
            "max_visits": 100,
        },
        wide_jobs=2,
        pipe_visits=100,
        pipe_queries=400,
        pipe_policy_queries=6000,
    ),
    "rehearsal": Scale(
        name="rehearsal",
        bench_threads=(1, 2),
        bench_visits=16,
        bench_positions=2,
        line_batches=(4, 8, 16),
        threads={"numAnalysisThreads": 2, "numSearchThreadsPerAnalysisThread": 1, "numNNServerThreadsPerModel": 1},
        load={
            "concurrency": [4],
            "warmup_s": 0.5,
            "window_s": 1.0,
            "min_windows": 2,
            "max_windows": 3,
            "tolerance": 0.5,
            "max_visits": 8,
        },
        wide_jobs=2,
        pipe_visits=8,
        pipe_queries=12,
        pipe_policy_queries=40,
    ),
}


def parse_budget(text: str) -> float:
    """`20m`, `1h30m`, `900s` or `900` (seconds) -> seconds."""
    match = re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*", text)
    if not match or not any(match.groups()):
        raise ValueError(f"--budget {text!r}: write it like 20m, 1h30m or 900s")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total < 30:
        raise ValueError(f"--budget {text!r}: at least 30 s")
    return total


@dataclass(frozen=True)
class QualifyOptions:
    binary: Path  # the KataGo build to qualify
    backend: str  # which kgbench backend that build is: cuda (GPU) or eigen (the CPU rehearsal)
    net: str  # katrain | synthetic:<arch> | a model file
    out: Path  # the results folder
    budget_s: float
    scale: Scale
    base_config: Path  # the runtime config the qualification's own runtime config is made from
    trt_binary: Path | None = None  # a TensorRT build, when there is one
    python: str = ""  # the interpreter for the subprocesses (default: this one)
    # the measuring steps to run (None: all); node, build, net and gemm always run (docs/qualify.md, --steps)
    steps: frozenset[str] | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
