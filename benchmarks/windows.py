"""How long a measurement window must be: one long level's answers re-counted in windows of several lengths, and
kgbench's stability rule (the last `min_windows` windows within `tolerance`, at most `max_windows`) applied from
many start offsets; per window length, how often the level settles, in how many windows, and its interval's width.

    python -m kgbench -m backend=sim nnMaxBatchSize=8,32 load=smoke load.min_windows=60 load.max_windows=60
    python -m benchmarks.windows multirun/<date>/<time>/*/requests.csv

The first line keeps every level loaded for 60 windows of load=smoke's length (the rule cannot settle before);
this re-counts their answers (issue 33: load=smoke's 0.5 s windows held ~5 answers at concurrency 4, so that level
settled in about two thirds of the jobs; docs/kgbench.md, "The quick start's smoke load").
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kgbench.load.interval import mean_interval
from kgbench.load.latency import windows_agree

__all__ = ["Settled", "answer_times", "main", "settle"]

LENGTHS = ((0.5, 6), (1.0, 6), (1.0, 8), (1.5, 6), (2.0, 6))  # (window_s, max_windows)
STEP_S = 0.05  # start offsets this far apart


@dataclass(frozen=True)
class Settled:
    stable: bool
    windows: int
    half_width: float  # the interval's half width over its mean (the windows measured)


def answer_times(path: Path) -> dict[int, list[float]]:
    """Per level, when each successful answer of its measurement came back (seconds, sorted)."""
    out: dict[int, list[float]] = {}
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row["phase"] == "measure" and not row["error"]:
                done = float(row["send_s"]) + float(row["latency_ms"]) / 1000.0
                out.setdefault(int(row["level"]), []).append(done)
    return {level: sorted(times) for level, times in out.items()}


def settle(
    times: Sequence[float],
    start: float,
    window_s: float,
    max_windows: int,
    min_windows: int = 3,
    tolerance: float = 0.25,
) -> Settled | None:
    """The rule from `start` (None: the answers end before `max_windows` windows would)."""
    if start + max_windows * window_s > times[-1]:
        return None
    rates: list[float] = []
    while len(rates) < max_windows:
        low = start + len(rates) * window_s
        rates.append(sum(1 for t in times if low <= t < low + window_s) / window_s)
        if len(rates) >= min_windows and windows_agree(rates, min_windows, tolerance):
            break
    interval = mean_interval(rates)
    half = interval.half_width / interval.mean if interval.mean else math.inf
    stable = len(rates) >= min_windows and windows_agree(rates, min_windows, tolerance)
    return Settled(stable, len(rates), half)


def _rows(path: Path) -> list[str]:
    lines = []
    for level, times in sorted(answer_times(path).items()):
        span = times[-1] - times[0]
        lines.append(f"{path}: level {level}, {len(times)} answers in {span:.1f} s ({len(times) / span:.1f} req/s)")
        for window_s, max_windows in LENGTHS:
            starts = [times[0] + k * STEP_S for k in range(int(span / STEP_S))]
            found = [s for s in (settle(times, t, window_s, max_windows) for t in starts) if s is not None]
            if not found:
                continue
            stable = sum(1 for s in found if s.stable) / len(found)
            windows = statistics.fmean(s.windows for s in found)
            half = statistics.median(s.half_width for s in found)
            lines.append(
                f"  {window_s:.1f} s x <= {max_windows}: settles {stable:.0%} of {len(found)} starts, "
                f"{windows:.1f} windows, interval +-{half:.0%} (median)"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.windows", description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", nargs="+", type=Path, help="requests.csv of jobs measured with long levels")
    args = parser.parse_args(argv)
    for path in args.csv:
        print("\n".join(_rows(path)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
