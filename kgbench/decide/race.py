"""Contenders raced (pure): when more than one run's interval overlaps the leader's, re-measure just those,
interleaved, until they separate or the budget is spent.

- **Who**: the runs the promote rule ties with the leader (kgbench.decide.ties: 95% intervals overlapping the
  leader's), the leader first, at most ``max_contenders`` of them (the highest values).
- **Order**: one replicate of each per round, A, B, C, A, B, C..., each a fresh job (its own kgserve and engines:
  the engine restarts between replicates), so a slow drift or a burst of outside load falls on every contender.
- **Intervals**: from the replicates (Student's t over their req/s, kgbench.load.interval) once there are two; a
  replicate that failed or was contended counts for nothing.
- **Stopping rule**: after each round from the second on, the contenders whose replicate interval no longer overlaps
  the leader's drop out (they separated); the race stops when one is left, or after ``max_rounds`` rounds. The ones
  left are the set that stayed indistinguishable; promote's tie rule (p99 beyond its noise, else the higher value)
  chooses among them.

The defaults and the figures that chose them: docs/sweeps.md, "Contenders raced" (benchmarks/race.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kgbench.decide.selection import Candidate, Selection
from kgbench.decide.ties import Scored, decide
from kgbench.load.interval import Interval, mean_interval

__all__ = [
    "MAX_CONTENDERS",
    "MAX_ROUNDS",
    "RaceOutcome",
    "RaceSettings",
    "contenders",
    "fold_replicates",
    "replicate_counts",
    "run_race",
    "still_tied",
]

MAX_ROUNDS = 4
MAX_CONTENDERS = 4
MIN_REPLICATES = 2  # an interval needs two


@dataclass(frozen=True)
class RaceSettings:
    """The `race` section of the config: ``enabled`` auto (None), true or false."""

    enabled: bool | None = None
    max_rounds: int = MAX_ROUNDS
    max_contenders: int = MAX_CONTENDERS

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> RaceSettings:
        known = {"enabled", "max_rounds", "max_contenders", "of", "round"}  # of/round: a replicate's bookkeeping
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown race setting(s) {unknown}; valid: enabled, max_rounds, max_contenders")
        raw = str(values.get("enabled", "auto")).strip().lower()
        if raw not in ("auto", "true", "false"):
            raise ValueError(f"race.enabled must be auto, true or false, got {values.get('enabled')!r}")
        out = cls(
            enabled=None if raw == "auto" else raw == "true",
            max_rounds=int(values.get("max_rounds", MAX_ROUNDS)),
            max_contenders=int(values.get("max_contenders", MAX_CONTENDERS)),
        )
        if out.max_rounds < MIN_REPLICATES or out.max_contenders < 2:
            raise ValueError(f"race.max_rounds must be >= {MIN_REPLICATES} and race.max_contenders >= 2")
        return out

    def on(self, simulated: bool, smoke: bool) -> bool:
        """auto: on for the real engines' loads, off for the simulated engine and for load=smoke."""
        return self.enabled if self.enabled is not None else not simulated and not smoke


def contenders(selection: Selection, max_contenders: int = MAX_CONTENDERS) -> list[str]:
    """The runs tied with the leader, highest value first (the leader first), capped; [] when none is tied."""
    decision = selection.decision
    if decision is None or len(decision.tied) < 2:
        return []
    return list(decision.tied[:max_contenders])


def still_tied(values: Mapping[str, Sequence[float]]) -> list[str]:
    """The contenders whose replicate interval overlaps the leader's (the leader first); one with fewer than two
    replicates cannot be told apart yet and stays."""
    judged = {run: mean_interval(v) for run, v in values.items() if len([x for x in v if math.isfinite(x)]) >= 2}
    if not judged:
        return list(values)
    decision = decide([Scored(run, interval, math.inf) for run, interval in judged.items()])
    assert decision is not None
    unjudged = [run for run in values if run not in judged]
    return [*decision.tied, *unjudged]


@dataclass
class RaceOutcome:
    contenders: tuple[str, ...]
    order: list[str] = field(default_factory=list)  # every replicate launched, in launch order
    values: dict[str, list[float]] = field(default_factory=dict)  # contender -> its replicates' req/s
    separated: dict[str, int] = field(default_factory=dict)  # contender -> the round after which it dropped out
    tied: tuple[str, ...] = ()  # the set that stayed indistinguishable
    rounds: int = 0
    stop: str = ""

    def summary(self) -> str:
        def name(run: str) -> str:
            return run[:12]

        dropped = "; ".join(f"{name(r)} separated after round {n}" for r, n in self.separated.items())
        left = ", ".join(name(r) for r in self.tied)
        return (
            f"raced {len(self.contenders)} contenders ({', '.join(name(r) for r in self.contenders)}) for "
            f"{self.rounds} round(s), interleaved; {dropped + '; ' if dropped else ''}"
            f"{'indistinguishable' if len(self.tied) > 1 else 'left'}: {left}; stopped: {self.stop}"
        )


MeasureRound = Callable[[list[str], int], Mapping[str, float | None]]  # (contenders in order, round) -> req/s


def run_race(contending: Sequence[str], measure_round: MeasureRound, settings: RaceSettings) -> RaceOutcome:
    """Race ``contending`` (leader first): ``measure_round`` measures one replicate of each, in the order given, and
    returns each one's req/s (None: failed or contended)."""
    outcome = RaceOutcome(tuple(contending), values={run: [] for run in contending})
    remaining = list(contending)
    for round_no in range(1, settings.max_rounds + 1):
        outcome.order.extend(remaining)
        measured = measure_round(list(remaining), round_no)
        for run in remaining:
            value = measured.get(run)
            if value is not None and math.isfinite(value):
                outcome.values[run].append(float(value))
        outcome.rounds = round_no
        if round_no < MIN_REPLICATES:
            continue
        tied = still_tied({run: outcome.values[run] for run in remaining})
        for run in remaining:
            if run not in tied:
                outcome.separated[run] = round_no
        remaining = [run for run in remaining if run in tied]
        if len(remaining) == 1:
            outcome.stop = f"separated after round {round_no}"
            break
    else:
        outcome.stop = f"budget spent ({settings.max_rounds} rounds)"
    outcome.tied = tuple(remaining)
    return outcome


def replicate_counts(c: Candidate) -> bool:
    """A replicate whose req/s counts: finished clean, no errors or timeouts (at any level), no fault, not
    contended."""
    return (
        c.status == "FINISHED"
        and not c.failed
        and not c.contended
        and not c.faults
        and (c.errors or 0) == 0
        and (c.timeouts or 0) == 0
        and (c.errors_all_levels or 0) == 0
        and (c.timeouts_all_levels or 0) == 0
        and c.req_per_s is not None
        and math.isfinite(c.req_per_s)
    )


def fold_replicates(cands: Sequence[Candidate]) -> list[Candidate]:
    """Race replicates (``replicate_of`` set) folded into the candidate of the run they re-measured: its req/s and
    interval from the replicates that count (two or more; with one, the run and its replicate), its p99 their mean.
    The replicates themselves are not candidates (promote writes the raced run's cfg: they ran the same one)."""
    replicates: dict[str, list[Candidate]] = {}
    for c in cands:
        if c.replicate_of:
            replicates.setdefault(c.replicate_of, []).append(c)
    out: list[Candidate] = []
    for c in cands:
        if c.replicate_of:
            continue
        good = [r for r in replicates.get(c.run_id, []) if replicate_counts(r)]
        if not good:
            out.append(c)
            continue
        basis = good if len(good) >= MIN_REPLICATES else [c, *good]
        interval: Interval = mean_interval([r.req_per_s for r in basis if r.req_per_s is not None])
        turns = [r.turns_per_s for r in basis if r.turns_per_s is not None and math.isfinite(r.turns_per_s)]
        turn_interval = mean_interval(turns) if turns else None
        p99s = [r.p99_ms for r in basis if r.p99_ms is not None and math.isfinite(r.p99_ms)]
        out.append(
            dataclasses.replace(
                c,
                req_per_s=interval.mean,
                req_per_s_low=interval.low,
                req_per_s_high=interval.high,
                turns_per_s=turn_interval.mean if turn_interval else c.turns_per_s,
                turns_per_s_low=turn_interval.low if turn_interval else c.turns_per_s_low,
                turns_per_s_high=turn_interval.high if turn_interval else c.turns_per_s_high,
                p99_ms=sum(p99s) / len(p99s) if p99s else c.p99_ms,
                replicates=len(good),
            )
        )
    return out
