"""Noise-aware choice among eligible runs (pure): differences inside the measurement noise are ties.

The run with the highest objective value leads. Every run whose 95% interval of that value overlaps the
leader's interval is tied with it (its difference is inside the run-to-run noise); among the tied runs the
lowest p99 wins, then the higher value, then the run id (a stable answer). A run without an interval (an old run,
or a single window) counts as the point it measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kgbench.load.interval import Interval

__all__ = ["Decision", "Scored", "decide", "tie_rule"]


def tie_rule(metric: str) -> str:
    return (
        f"the highest {metric} leads; runs whose 95% interval of {metric} overlaps the leader's are tied "
        f"(inside the noise); among the tied the lowest p99 wins (then higher {metric}, then run id)"
    )


@dataclass(frozen=True)
class Scored:
    """One eligible run as the rule sees it."""

    run_id: str
    interval: Interval  # the objective value (mean) and its 95% interval
    p99_ms: float

    @property
    def value(self) -> float:
        return self.interval.mean


@dataclass(frozen=True)
class Decision:
    winner: str
    leader: str
    tied: tuple[str, ...]  # run ids tied with the leader (the leader included), best value first
    explanation: str


def _p99(s: Scored) -> float:
    return s.p99_ms if math.isfinite(s.p99_ms) else math.inf


def _fmt(s: Scored, metric: str) -> str:
    ci = s.interval
    spread = f" [{ci.low:.3g}, {ci.high:.3g}]" if ci.high > ci.low else " (no interval)"
    p99 = f"{s.p99_ms:.0f} ms" if math.isfinite(s.p99_ms) else "-"
    return f"{s.run_id[:12]} {metric} {ci.mean:.4g}{spread} p99 {p99}"


def decide(scored: Sequence[Scored], metric: str = "req/s") -> Decision | None:
    """Apply the rule (module docstring) to eligible runs; None when there are none."""
    if not scored:
        return None
    leader = min(scored, key=lambda s: (-s.value, _p99(s), s.run_id))
    tied = sorted(
        (s for s in scored if s.interval.overlaps(leader.interval)), key=lambda s: (-s.value, _p99(s), s.run_id)
    )
    winner = min(tied, key=lambda s: (_p99(s), -s.value, s.run_id))
    if len(tied) == 1:
        text = f"{_fmt(leader, metric)} leads and no other run is within its interval: it wins"
    else:
        others = "; ".join(_fmt(s, metric) for s in tied if s is not leader)
        text = (
            f"{_fmt(leader, metric)} leads; tied within noise: {others}; "
            f"lowest p99 among the {len(tied)} tied wins: {winner.run_id[:12]}"
        )
    return Decision(winner.run_id, leader.run_id, tuple(s.run_id for s in tied), text)
