"""Parse the output of `katago benchmark` (pure functions, standard library only).

The output (stdout) holds progress lines separated by carriage returns, then one final line per
thread count::

    numSearchThreads =  4: 4 / 4 positions, visits/s = 206.06 nnEvals/s = 196.67 nnBatches/s = 111.40 \
avgBatchSize = 1.77 (3.9 secs) (EloDiff +292)

and an Elo table whose best row says `(recommended)`::

    numSearchThreads =  4:  +292 Elo (recommended)

`parse_benchmark_output(text)` turns it into a `BenchmarkResult`; text without any final per-thread line
raises `BenchmarkParseError`, which carries the raw text (kgbench attaches it to the failed run).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

__all__ = [
    "BenchmarkParseError",
    "BenchmarkResult",
    "ThreadResult",
    "parse_benchmark_output",
    "trt_cache_status",
]

_NUM = r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|-?nan|-?inf)"
_FINAL_RE = re.compile(
    r"numSearchThreads\s*=\s*(\d+):\s*(\d+)\s*/\s*(\d+)\s+positions,\s*"
    rf"visits/s\s*=\s*{_NUM}\s+nnEvals/s\s*=\s*{_NUM}\s+nnBatches/s\s*=\s*{_NUM}\s+"
    rf"avgBatchSize\s*=\s*{_NUM}\s*\(\s*{_NUM}\s*secs\)"
    r"(?:\s*\(EloDiff\s+(baseline|[-+]?\d+(?:\.\d+)?)\))?"
)
_ELO_RE = re.compile(
    r"^\s*numSearchThreads\s*=\s*(\d+):\s*(?:\(baseline\)|([-+]?\d+(?:\.\d+)?)\s*Elo)\s*(\(recommended\))?",
    re.MULTILINE,
)
_VISITS_RE = re.compile(r"Testing using (\d+) visits")
_CONFIGURED_RE = re.compile(r"currently set to use numSearchThreads\s*=\s*(\d+)")
_BOARD_RE = re.compile(r"board size (\d+)x(\d+)")


class BenchmarkParseError(ValueError):
    """`katago benchmark` output that holds no result; `.raw_text` is the whole output."""

    def __init__(self, message: str, raw_text: str) -> None:
        super().__init__(message)
        self.raw_text = raw_text


@dataclass(frozen=True)
class ThreadResult:
    """The final line for one thread count."""

    threads: int
    visits_per_s: float
    nn_evals_per_s: float
    nn_batches_per_s: float
    avg_batch_size: float
    seconds: float
    positions: int
    elo_diff: float | None  # vs the first thread count (baseline = 0.0); None when not printed


@dataclass(frozen=True)
class BenchmarkResult:
    per_threads: tuple[ThreadResult, ...]
    recommended_threads: int | None
    recommended_source: str  # "katago" (the "(recommended)" mark) | "elo" (highest EloDiff) | "none"
    visits: int | None = None
    configured_threads: int | None = None
    board_size: str | None = None
    elo_table: dict[int, float] = field(default_factory=dict)

    def by_threads(self) -> dict[int, ThreadResult]:
        return {row.threads: row for row in self.per_threads}

    def visits_per_s(self) -> dict[int, float]:
        return {row.threads: row.visits_per_s for row in self.per_threads}

    def headline(self) -> ThreadResult:
        """The recommended thread count's row, else the fastest one."""
        rows = self.by_threads()
        if self.recommended_threads is not None and self.recommended_threads in rows:
            return rows[self.recommended_threads]
        return max(self.per_threads, key=lambda row: row.visits_per_s)

    def metric_series(self) -> list[tuple[str, float, int]]:
        """(metric name, value, step=threads) for MLflow: one series per measured quantity."""
        out: list[tuple[str, float, int]] = []
        for row in self.per_threads:
            values = {
                "bench_visits_per_s": row.visits_per_s,
                "bench_nn_evals_per_s": row.nn_evals_per_s,
                "bench_nn_batches_per_s": row.nn_batches_per_s,
                "bench_avg_batch_size": row.avg_batch_size,
                "bench_elo_diff": row.elo_diff,
            }
            out.extend((name, value, row.threads) for name, value in values.items() if value is not None)
        return out

    def headline_metrics(self) -> dict[str, float]:
        """Single-valued metrics: the headline row (recommended threads) under the common names."""
        best = self.headline()
        metrics = {
            "visits_per_s": best.visits_per_s,
            "nn_evals_per_s": best.nn_evals_per_s,
            "nn_avg_batch_size": best.avg_batch_size,
            "bench_threads": float(best.threads),
            "max_visits_per_s": max(row.visits_per_s for row in self.per_threads),
        }
        if self.recommended_threads is not None:
            metrics["recommended_threads"] = float(self.recommended_threads)
        return {k: v for k, v in metrics.items() if math.isfinite(v)}


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def parse_benchmark_output(text: str) -> BenchmarkResult:
    """Parse `katago benchmark` stdout (progress lines split by '\\r' are fine). Raises
    BenchmarkParseError (with the raw text) when no final per-thread line is found."""
    normalized = text.replace("\r\n", "\n").replace("\r", "\n")
    elo_table: dict[int, float] = {}
    recommended: int | None = None
    for elo_match in _ELO_RE.finditer(normalized):
        threads = int(elo_match.group(1))
        elo_table[threads] = float(elo_match.group(2)) if elo_match.group(2) else 0.0
        if elo_match.group(3):
            recommended = threads
    rows: dict[int, ThreadResult] = {}
    for line in normalized.split("\n"):
        match = _FINAL_RE.search(line)
        if not match:
            continue
        threads = int(match.group(1))
        elo_text = match.group(9)
        if elo_text is None:
            elo: float | None = elo_table.get(threads)
        else:
            elo = 0.0 if elo_text == "baseline" else float(elo_text)
        rows[threads] = ThreadResult(
            threads=threads,
            positions=int(match.group(2)),
            visits_per_s=_float(match.group(4)),
            nn_evals_per_s=_float(match.group(5)),
            nn_batches_per_s=_float(match.group(6)),
            avg_batch_size=_float(match.group(7)),
            seconds=_float(match.group(8)),
            elo_diff=elo,
        )
    if not rows:
        raise BenchmarkParseError(
            "no per-thread result line (numSearchThreads = N: ... visits/s = ... avgBatchSize = ...) "
            "found in katago benchmark output",
            text,
        )
    source = "katago" if recommended is not None else "none"
    if recommended is None:
        elos = {t: r.elo_diff for t, r in rows.items() if r.elo_diff is not None}
        if elos:
            recommended, source = max(elos, key=lambda t: (elos[t], -t)), "elo"
    visits = _VISITS_RE.search(normalized)
    configured = _CONFIGURED_RE.search(normalized)
    board = _BOARD_RE.search(normalized)
    return BenchmarkResult(
        per_threads=tuple(rows[t] for t in sorted(rows)),
        recommended_threads=recommended,
        recommended_source=source,
        visits=int(visits.group(1)) if visits else None,
        configured_threads=int(configured.group(1)) if configured else None,
        board_size=f"{board.group(1)}x{board.group(2)}" if board else None,
        elo_table=elo_table,
    )


def trt_cache_status(log_text: str) -> str | None:
    """TensorRT timing/plan cache use from KataGo's log: "hit", "miss", or None (not TensorRT)."""
    if re.search(r"Using existing (timing|plan) cache", log_text):
        return "hit"
    if re.search(r"Creating new (timing|plan) cache", log_text):
        return "miss"
    return None
