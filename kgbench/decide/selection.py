"""The promote rule, as a pure function over candidate runs (no MLflow here).

Rule: the winner is the run with the highest req/s among runs that
  - FINISHED (MLflow status) and kgbench.status is not "failed",
  - had zero errors and zero timeouts,
  - are not flagged kgbench.unstable or kgbench.invalid,
  - have a p99 within the SLO when one is given (`--slo-p99-ms`),
  - are not simulated, unless simulated runs are allowed (`--allow-simulated`).
Ties on req/s are broken by the lower p99 (then the run id, for a stable answer).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["RULE", "Candidate", "Selection", "Verdict", "choose_winner", "format_table"]

RULE = (
    "highest req/s among FINISHED runs with 0 errors and 0 timeouts, not flagged unstable or invalid, "
    "p99 within the SLO when given, simulated runs only with --allow-simulated; ties -> lower p99"
)


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
    unstable: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    failed: bool = False  # kgbench.status == "failed"
    simulated: bool = False
    promoted: bool = False
    label: str = ""  # the swept keys, for the table
    extra: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    candidate: Candidate
    reason: str | None  # None: eligible


@dataclass(frozen=True)
class Selection:
    winner: Candidate | None
    verdicts: tuple[Verdict, ...]

    @property
    def eligible(self) -> list[Candidate]:
        return [v.candidate for v in self.verdicts if v.reason is None]

    def only_simulated_blocked(self) -> bool:
        """No winner, and some run would have been eligible with --allow-simulated."""
        return self.winner is None and any(v.reason == "simulated" for v in self.verdicts)


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _reason(c: Candidate, slo_p99_ms: float | None, allow_simulated: bool) -> str | None:
    if c.status != "FINISHED":
        return f"status {c.status}"
    if c.failed:
        return "kgbench.status failed"
    if not _finite(c.req_per_s):
        return "no req_per_s"
    if c.errors is None:
        return "no errors metric"
    if c.errors > 0:
        return f"{c.errors:g} errors"
    if c.timeouts is not None and c.timeouts > 0:
        return f"{c.timeouts:g} timeouts"
    if c.unstable:
        return "unstable"
    if c.invalid:
        return f"invalid ({c.invalid_reason})" if c.invalid_reason else "invalid"
    if slo_p99_ms is not None:
        if not _finite(c.p99_ms):
            return "no p99_ms (SLO given)"
        assert c.p99_ms is not None
        if c.p99_ms > slo_p99_ms:
            return f"p99 {c.p99_ms:.0f} ms > SLO {slo_p99_ms:g} ms"
    if c.simulated and not allow_simulated:
        return "simulated"
    return None


def _key(c: Candidate) -> tuple[float, float, str]:
    p99 = c.p99_ms if _finite(c.p99_ms) else math.inf
    assert c.req_per_s is not None and p99 is not None
    return (-c.req_per_s, p99, c.run_id)


def choose_winner(
    candidates: Iterable[Candidate], slo_p99_ms: float | None = None, allow_simulated: bool = False
) -> Selection:
    """Apply RULE. Verdicts keep the candidates' order, each with the reason it was passed over."""
    verdicts = tuple(Verdict(c, _reason(c, slo_p99_ms, allow_simulated)) for c in candidates)
    eligible = [v.candidate for v in verdicts if v.reason is None]
    winner = min(eligible, key=_key) if eligible else None
    return Selection(winner=winner, verdicts=verdicts)


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def format_table(selection: Selection) -> str:
    """A plain-text table of the candidates, best first, marking the winner and the reasons."""
    rows = sorted(
        selection.verdicts,
        key=lambda v: (v.reason is not None, -(v.candidate.req_per_s or -math.inf), v.candidate.run_id),
    )
    header = ["", "run", "backend", "req/s", "p50 ms", "p99 ms", "errors", "sim", "config", "verdict"]
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
                _fmt(c.p50_ms),
                _fmt(c.p99_ms),
                _fmt(c.errors, 0),
                "yes" if c.simulated else "no",
                c.label or "-",
                "WINNER" if mark else (v.reason or "eligible"),
            ]
        )
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in [header, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
