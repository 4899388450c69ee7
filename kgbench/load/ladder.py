"""Which concurrency level comes next, and where a job's throughput saturates (pure functions).

``ladder: fixed`` runs ``load.concurrency`` as given (``order: descending``: highest first).
``ladder: auto`` starts at its first value and doubles,
stopping at the first level that
  - does not raise req/s beyond noise: its 95% interval overlaps the best level's so far (or it is lower),
  - has a p99 above ``load.max_p99_ms`` (when set),
  - completed no request at all,
or once ``load.max_concurrency`` was measured (a doubling past it is clipped to it).
The knee is the lowest concurrency whose req/s reaches 95% of the job's best level: more in flight than that
buys at most 5% throughput and costs latency.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kgbench.load.types import LevelSummary, LoadSettings

__all__ = ["KNEE_SHARE", "Step", "knee", "next_level", "planned_levels"]

KNEE_SHARE = 0.95


@dataclass(frozen=True)
class Step:
    """The next level to run (None: the ladder ends, ``reason`` says why)."""

    concurrency: int | None
    reason: str | None = None


def _interval(level: LevelSummary, turns: bool = False) -> tuple[float, float]:
    value, low, high = level.rate(turns)
    return (low if math.isfinite(low) else value), (high if math.isfinite(high) else value)


def next_level(load: LoadSettings, done: Sequence[LevelSummary]) -> Step:
    """The level after ``done`` (the levels measured so far, in order)."""
    if load.mode == "open":
        return Step(max(load.concurrency)) if not done else Step(None, "open loop: one level")
    if load.ladder == "fixed":
        levels = sorted(load.concurrency, reverse=True) if load.order == "descending" else load.concurrency
        if len(done) < len(levels):
            return Step(levels[len(done)])
        return Step(None, "fixed ladder done")
    if not done:
        return Step(load.concurrency[0])
    last = done[-1]
    turns = load.counts_turns  # a review's level saturates in analysed turns/s (its requests are whole games)
    unit = "turns/s" if turns else "req/s"
    if last.rate(turns)[0] <= 0:
        return Step(None, f"no request succeeded at concurrency {last.concurrency}")
    if load.max_p99_ms is not None and last.p99_ms > load.max_p99_ms:
        return Step(
            None, f"p99 {last.p99_ms:.0f} ms > max_p99_ms {load.max_p99_ms:g} at concurrency {last.concurrency}"
        )
    if len(done) > 1:
        best = max(done[:-1], key=lambda lv: lv.rate(turns)[0])
        low, _ = _interval(last, turns)
        _, best_high = _interval(best, turns)
        if last.rate(turns)[0] <= best.rate(turns)[0] or low <= best_high:
            return Step(
                None,
                f"saturated: {last.rate(turns)[0]:.3g} {unit} at concurrency {last.concurrency} is within noise of "
                f"{best.rate(turns)[0]:.3g} at {best.concurrency}",
            )
    if last.concurrency >= load.max_concurrency:
        return Step(None, f"max_concurrency {load.max_concurrency} reached")
    return Step(min(2 * last.concurrency, load.max_concurrency))


def planned_levels(load: LoadSettings) -> int:
    """How many levels the ladder runs at most (for progress display)."""
    if load.mode == "open":
        return 1
    if load.ladder == "fixed":
        return len(load.concurrency)
    count, level = 1, load.concurrency[0]
    while level < load.max_concurrency:
        level, count = min(2 * level, load.max_concurrency), count + 1
    return count


def knee(levels: Sequence[LevelSummary], share: float = KNEE_SHARE) -> int | None:
    """The lowest concurrency whose req/s reaches ``share`` of the best level's (None: no level succeeded)."""
    ok = [lv for lv in levels if lv.req_per_s > 0]
    if not ok:
        return None
    target = share * max(lv.req_per_s for lv in ok)
    return min(lv.concurrency for lv in ok if lv.req_per_s >= target)
