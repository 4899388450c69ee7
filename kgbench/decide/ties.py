"""Noise-aware choice among eligible runs (pure): differences inside the measurement noise are ties.

The run with the highest objective value leads. Every run whose 95% interval of that value overlaps the
leader's interval is tied with it (its difference is inside the run-to-run noise). Among the tied runs p99 decides
only where it differs beyond its own noise: the leader stands unless some tied runs have a p99 that the leader's
exceeds by more than P99_MARGIN (25%, i.e. theirs is more than 20% lower); then the highest value of those takes the
lead and the same test is made against it, until no tied run's p99 is that far below (ties in value: the lower p99,
then the run id: a stable answer). A run without an interval (an old run, or a single window) counts as the point it
measured.

Why a margin: a p99 is noisier than a mean. On the real KataGo CPU build (docs/sweeps.md, issue 28), two
measurements of the same config differed in p99 by a median of 8%, 20% at the 90th percentile and 38% at most (80
pairs of clean measurements of 8 configs); the tied configs' p99s spread over 1,002-1,142 ms, so "the lowest p99"
picked whichever config drew the luckiest tail (4x4 in one run, 4x2 in the next). Within the margin, the tail is
not what tells them apart and the leader's higher value stands; a clearly better tail still wins (issue 16's
case: p99 0.57 s against 2.35 s). The margin is measured from the run in the lead, never from the lowest p99 alone:
a run whose p99 is within noise of the leader's never displaces it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kgbench.load.interval import Interval

__all__ = ["P99_MARGIN", "Decision", "Scored", "decide", "tie_rule"]

P99_MARGIN = 0.25  # a p99 that another exceeds by up to 25% is alike: the 90th percentile of a config's own spread


def tie_rule(metric: str) -> str:
    return (
        f"the highest {metric} leads; runs whose 95% interval of {metric} overlaps the leader's are tied "
        f"(inside the noise); among the tied the leader stands unless its p99 is over {P99_MARGIN:.0%} above some "
        f"others' (beyond the noise): then the highest {metric} of those leads, and so on (then lower p99, then run id)"
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
    passed_for_tail: tuple[str, ...] = ()  # tied runs of a higher value than the winner's, passed over for its p99


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
    clause = _tail_clause(tied[0], winner, metric)
    return f"indistinguishable from {others} ({evidence}); among the {len(tied)} {clause}"


def _by_tail(tied: Sequence[Scored]) -> Scored:
    """The rule among the tied (best value first): the lead passes to the highest value among the runs whose p99 the
    current lead's exceeds by more than P99_MARGIN, until there are none."""
    lead = tied[0]
    while True:
        better = [s for s in tied if _p99(lead) > _p99(s) * (1 + P99_MARGIN)]
        if not better:
            return lead
        lead = better[0]  # `tied` is sorted best value first


def _tail_clause(leader: Scored, winner: Scored, metric: str) -> str:
    if winner is leader:
        return (
            f"no p99 beyond the noise below the leader's (its p99 not over {P99_MARGIN:.0%} above): "
            f"the highest {metric} wins"
        )
    return (
        f"the leader's p99 is over {P99_MARGIN:.0%} above a tied run's (beyond the noise): "
        f"the highest {metric} of those wins"
    )


def decide(scored: Sequence[Scored], metric: str = "req/s") -> Decision | None:
    """Apply the rule (module docstring) to eligible runs; None when there are none."""
    if not scored:
        return None
    leader = min(scored, key=lambda s: (-s.value, _p99(s), s.run_id))
    tied = sorted(
        (s for s in scored if s.interval.overlaps(leader.interval)), key=lambda s: (-s.value, _p99(s), s.run_id)
    )
    winner = _by_tail(tied)
    if len(tied) == 1:
        text = f"{_fmt(leader, metric)} leads and no other run is within its interval: it wins"
    else:
        others = "; ".join(_fmt(s, metric) for s in tied if s is not leader)
        text = (
            f"{_fmt(leader, metric)} leads; tied within noise: {others}; "
            f"among the {len(tied)} tied, {_tail_clause(leader, winner, metric)}: {winner.run_id[:12]}"
        )
    return Decision(
        winner.run_id,
        leader.run_id,
        tuple(s.run_id for s in tied),
        text,
        _reason(tied, winner, metric),
        tuple(s.run_id for s in tied if s.value > winner.value),
    )
