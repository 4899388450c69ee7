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
    replicates: int = 0  # race replicates its interval comes from (0: the run's own windows or repeats)

    @property
    def value(self) -> float:
        return self.interval.mean


@dataclass(frozen=True)
class Decision:
    winner: str
    leader: str
    tied: tuple[str, ...]  # run ids tied with the leader (the leader included), best value first: indistinguishable
    explanation: str
    reason: str = ""  # the verdict's clause: the indistinguishable set, its evidence and the rule among them


def _p99(s: Scored) -> float:
    return s.p99_ms if math.isfinite(s.p99_ms) else math.inf


def _fmt(s: Scored, metric: str) -> str:
    ci = s.interval
    spread = f" [{ci.low:.3g}, {ci.high:.3g}]" if ci.high > ci.low else " (no interval)"
    p99 = f"{s.p99_ms:.0f} ms" if math.isfinite(s.p99_ms) else "-"
    raced = f" ({s.replicates} race replicates)" if s.replicates else ""
    return f"{s.run_id[:12]} {metric} {ci.mean:.4g}{spread}{raced} p99 {p99}"


def _reason(tied: Sequence[Scored], winner: Scored, metric: str) -> str:
    if len(tied) == 1:
        return f"highest {metric}, and no other run within its 95% interval"
    others = ", ".join(s.run_id[:12] for s in tied if s is not winner)
    raced = [s for s in tied if s.replicates]
    evidence = (
        f"still within each other's 95% interval after a race ({min(s.replicates for s in raced)}+ replicates each)"
        if len(raced) == len(tied)
        else f"within the leader's 95% interval of {metric}"
    )
    return f"indistinguishable from {others} ({evidence}); among the {len(tied)} the lowest p99 wins"


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
    return Decision(winner.run_id, leader.run_id, tuple(s.run_id for s in tied), text, _reason(tied, winner, metric))
