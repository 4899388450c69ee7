"""The promote rule, as a pure function over candidate runs (no MLflow here).

Rule: among the runs that
  - FINISHED (MLflow status) and kgbench.status is not "failed",
  - had zero errors and zero timeouts,
  - are not flagged kgbench.unstable or kgbench.invalid, and were not pruned by an Optuna search,
  - were not measured beside other work (kgbench.contended: still contended after their re-measures),
  - have a p99 within the SLO when one is given (`--slo-p99-ms`),
  - are not simulated, unless simulated runs are allowed (`--allow-simulated`),
  - did not run a synthetic net (random weights), unless allowed (`--allow-synthetic`: a throughput test),
the objective (req/s; goodput: req/s finished within a latency objective; or analysed turns/s, the objective of
traffic whose requests are not one turn each, load.traffic review, interactive or mixed) decides, noise-aware
(kgbench.decide.ties): runs whose 95% intervals overlap the best run's are tied; among them p99 decides only
beyond its own noise (the leader's more than 25% above another's), else the higher value stands.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from kgbench.decide.ties import P99_MARGIN, Decision, Scored, decide, tie_rule
from kgbench.load.interval import Interval

__all__ = ["OBJECTIVES", "RULE", "Candidate", "Objective", "Selection", "Verdict", "choose_winner", "format_table",
           "objective_for", "rule_text"]  # fmt: skip

Objective = Literal["req_per_s", "goodput", "turns_per_s"]
OBJECTIVES: tuple[Objective, ...] = ("req_per_s", "goodput", "turns_per_s")
_UNITS = {"req_per_s": "req/s", "goodput": "goodput", "turns_per_s": "turns/s"}
_ELIGIBLE = (
    "FINISHED runs with 0 errors and 0 timeouts at every level, no engine restart or kgserve death while measured, not "
    "flagged unstable, invalid or contended, p99 within the SLO when "
    "given, simulated runs only with --allow-simulated, synthetic nets only with --allow-synthetic"
)


def rule_text(objective: Objective = "req_per_s", slo_ms: float | None = None) -> str:
    """The whole rule in one line, as printed with every decision."""
    metric = _UNITS[objective] + (f" (req/s within {slo_ms:g} ms)" if objective == "goodput" and slo_ms else "")
    return f"among {_ELIGIBLE}: {tie_rule(metric)}"


RULE = rule_text()


@dataclass(frozen=True)
class Candidate:
    run_id: str
    status: str = "FINISHED"  # MLflow run status
    backend: str = ""
    req_per_s: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    errors: float | None = None
    timeouts: float | None = None
    errors_all_levels: float | None = None  # every level's errors (None: a run from before they were counted)
    timeouts_all_levels: float | None = None
    faults: str = ""  # kgbench.faults: an engine restarted, kgserve died while measured
    unstable: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    contended: bool = False  # kgbench.contended: measured beside other work, still so after its re-measures
    contention: str = ""  # the figures that decided it
    failed: bool = False  # kgbench.status == "failed"
    pruned: bool = False  # stopped early by the Optuna search (kgbench.pruned): its last levels never ran
    simulated: bool = False
    synthetic: bool = False  # ran a synthetic net (tag synthetic_net): a throughput test, never a served cfg
    promoted: bool = False
    label: str = ""  # the swept keys, for the table
    extra: Mapping[str, str] = field(default_factory=dict)
    req_per_s_low: float | None = None  # 95% interval of req/s (None: not measured, the point counts)
    req_per_s_high: float | None = None
    goodput_per_s: float | None = None  # req/s within slo_ms
    goodput_low: float | None = None
    goodput_high: float | None = None
    slo_ms: float | None = None  # the latency objective goodput was counted against
    replicate_of: str = ""  # a race's replicate: the run whose config it re-measured (kgbench.decide.race)
    replicates: int = 0  # race replicates its req/s (and turns/s) interval comes from
    turns_per_s: float | None = None  # analysed turns/s (distinct traffic: one a request) with its interval
    turns_per_s_low: float | None = None
    turns_per_s_high: float | None = None
    traffic: str = "distinct"  # load.traffic of the run

    def objective(self, objective: Objective) -> Interval | None:
        """The objective's value with its interval (a point when no interval was logged); None if absent."""
        mean, low, high = {
            "req_per_s": (self.req_per_s, self.req_per_s_low, self.req_per_s_high),
            "goodput": (self.goodput_per_s, self.goodput_low, self.goodput_high),
            "turns_per_s": (self.turns_per_s, self.turns_per_s_low, self.turns_per_s_high),
        }[objective]
        if mean is None or not math.isfinite(mean):
            return None
        if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
            return Interval.point(mean)
        return Interval(mean, min(low, mean), max(high, mean), 2)


@dataclass(frozen=True)
class Verdict:
    candidate: Candidate
    reason: str | None  # None: eligible


@dataclass(frozen=True)
class Selection:
    winner: Candidate | None
    verdicts: tuple[Verdict, ...]
    decision: Decision | None = None  # how the winner was chosen among the eligible (the tie rule)
    objective: Objective = "req_per_s"

    def set_aside(self) -> list[str]:
        """One line per run measured beside other work (kgbench.contended), never promoted: its id and figures."""
        return [
            f"set aside {v.candidate.run_id} ({v.candidate.label or '-'}): contended"
            + (f" ({v.candidate.contention})" if v.candidate.contention else "")
            for v in self.verdicts
            if v.candidate.contended
        ]

    @property
    def eligible(self) -> list[Candidate]:
        return [v.candidate for v in self.verdicts if v.reason is None]

    def only_simulated_blocked(self) -> bool:
        """No winner, and some run would have been eligible with --allow-simulated."""
        return self.winner is None and any(v.reason == "simulated" for v in self.verdicts)

    def only_synthetic_blocked(self) -> bool:
        """No winner, and some run would have been eligible with --allow-synthetic."""
        return self.winner is None and any(v.reason == "synthetic net" for v in self.verdicts)


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _reason(
    c: Candidate, slo_p99_ms: float | None, allow_simulated: bool, objective: Objective, allow_synthetic: bool = False
) -> str | None:
    if c.status != "FINISHED":
        return f"status {c.status}"
    if c.failed:
        return "kgbench.status failed"
    if not _finite(c.req_per_s):
        return "no req_per_s"
    if objective == "goodput" and not _finite(c.goodput_per_s):
        return "no goodput_per_s"
    if objective == "turns_per_s" and not _finite(c.turns_per_s):
        return "no turns_per_s"
    if c.faults:
        return f"faulted while measured ({c.faults})"
    if c.errors is None:
        return "no errors metric"
    if c.errors > 0:
        return f"{c.errors:g} errors"
    if c.timeouts is not None and c.timeouts > 0:
        return f"{c.timeouts:g} timeouts"
    if c.errors_all_levels is not None and c.errors_all_levels > 0:
        return f"{c.errors_all_levels:g} errors over all levels (none at the headline level)"
    if c.timeouts_all_levels is not None and c.timeouts_all_levels > 0:
        return f"{c.timeouts_all_levels:g} timeouts over all levels (none at the headline level)"
    if c.unstable:
        return "unstable"
    if c.invalid:
        return f"invalid ({c.invalid_reason})" if c.invalid_reason else "invalid"
    if c.pruned:
        return "pruned by the search"
    if c.contended:
        return f"contended ({c.contention})" if c.contention else "contended"
    if slo_p99_ms is not None:
        if not _finite(c.p99_ms):
            return "no p99_ms (SLO given)"
        assert c.p99_ms is not None
        if c.p99_ms > slo_p99_ms:
            return f"p99 {c.p99_ms:.0f} ms > SLO {slo_p99_ms:g} ms"
    if c.simulated and not allow_simulated:
        return "simulated"
    if c.synthetic and not allow_synthetic:
        return "synthetic net"
    return None


def _scored(c: Candidate, objective: Objective) -> Scored:
    interval = c.objective(objective)
    assert interval is not None  # eligible candidates have the objective
    p99 = c.p99_ms if c.p99_ms is not None and _finite(c.p99_ms) else math.inf
    return Scored(c.run_id, interval, p99, c.replicates if objective != "goodput" else 0)


def choose_winner(
    candidates: Iterable[Candidate],
    slo_p99_ms: float | None = None,
    allow_simulated: bool = False,
    objective: Objective = "req_per_s",
    allow_synthetic: bool = False,
) -> Selection:
    """Apply the rule (``rule_text``). Verdicts keep the candidates' order, each with the reason it was passed
    over; ``decision`` explains the choice among the eligible."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    verdicts = tuple(
        Verdict(c, _reason(c, slo_p99_ms, allow_simulated, objective, allow_synthetic)) for c in candidates
    )
    eligible = {v.candidate.run_id: v.candidate for v in verdicts if v.reason is None}
    decision = decide([_scored(c, objective) for c in eligible.values()], _UNITS[objective])
    winner = eligible[decision.winner] if decision else None
    return Selection(winner=winner, verdicts=verdicts, decision=decision, objective=objective)


def objective_for(candidates: Iterable[Candidate]) -> Objective:
    """The default objective of these runs: analysed turns/s when some run's requests are not one turn each (its
    load.traffic is review, interactive or mixed: a review's request is a whole game), else req/s."""
    return "turns_per_s" if any(c.traffic != "distinct" for c in candidates) else "req_per_s"


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _interval(c: Candidate) -> str:
    if c.req_per_s_low is None or c.req_per_s_high is None or not _finite(c.req_per_s_low):
        return "-"
    raced = f" ({c.replicates} replicates)" if c.replicates else ""
    return f"[{c.req_per_s_low:.2f}, {c.req_per_s_high:.2f}]{raced}"


def _tied_verdict(run_id: str, tied: set[str], passed: set[str]) -> str:
    if run_id not in tied:
        return "eligible"
    return f"tied, p99 over {P99_MARGIN:.0%} above a faster-tailed run's" if run_id in passed else "tied, lower value"


def format_table(selection: Selection) -> str:
    """A plain-text table of the candidates, best first, marking the winner and the reasons."""

    def value(c: Candidate) -> float:
        interval = c.objective(selection.objective)
        return interval.mean if interval is not None else -math.inf

    rows = sorted(selection.verdicts, key=lambda v: (v.reason is not None, -value(v.candidate), v.candidate.run_id))
    header = ["", "run", "backend", "req/s", "95% interval", "turns/s", "goodput", "p50 ms", "p99 ms", "errors", "sim",
              "config", "verdict"]  # fmt: skip
    tied = set(selection.decision.tied) if selection.decision else set()
    passed = set(selection.decision.passed_for_tail) if selection.decision else set()
    body: list[list[str]] = []
    for v in rows:
        c = v.candidate
        mark = "*" if selection.winner is not None and c.run_id == selection.winner.run_id else ""
        body.append(
            [
                mark,
                c.run_id[:12],
                c.backend,
                _fmt(c.req_per_s, 2),
                _interval(c),
                _fmt(c.turns_per_s, 2),
                _fmt(c.goodput_per_s, 2),
                _fmt(c.p50_ms),
                _fmt(c.p99_ms),
                _fmt(c.errors, 0),
                "yes" if c.simulated else "no",
                c.label or "-",
                "WINNER" if mark else (v.reason or _tied_verdict(c.run_id, tied, passed)),
            ]
        )
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in [header, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
