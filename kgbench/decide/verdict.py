"""The promote rule's choice in one line, as promote prints what it did and a sweep prints its best job:

    promoted run 3f2a9c1d: cuda nnMaxBatchSize=128 527.7 req/s +-1.2%, p99 912 ms, over 5b1e04aa (trt
    nnMaxBatchSize=64, 498.0 req/s) for the highest req/s beyond the noise

A load=smoke winner's line ends with SMOKE_NOTE. `verdict_line` writes the winner's part; `over_text` (the "over Y
for reason Z" part) reads the selection's decision (kgbench.decide.ties), so the rule's wording of a choice lives in
one place.
"""

from __future__ import annotations

import math
from collections import Counter

from kgbench.decide.selection import Candidate, Selection
from kgbench.decide.ties import P99_MARGIN
from kgbench.track.schema import LOAD_SMOKE

__all__ = ["SMOKE_NOTE", "describe", "over_text", "verdict_line"]

# a load=smoke winner's verdict says what it is (conf/load/smoke.yaml: windows of seconds, a few hundred answers)
SMOKE_NOTE = "a smoke verdict (load=smoke: seconds of load to check the pipeline, not a measurement to serve by)"

_SHOWN_TIED = 2  # tied runs named in full; the rest are counted


def _value(c: Candidate, selection: Selection) -> tuple[float | None, float | None, float | None, str]:
    if selection.objective == "goodput":
        return c.goodput_per_s, c.goodput_low, c.goodput_high, "goodput/s"
    if selection.objective == "turns_per_s":
        return c.turns_per_s, c.turns_per_s_low, c.turns_per_s_high, "turns/s"
    return c.req_per_s, c.req_per_s_low, c.req_per_s_high, "req/s"


def _config(c: Candidate) -> str:
    return f"{c.backend} {c.label}".strip()


def describe(c: Candidate, selection: Selection) -> str:
    """`5b1e04aa (trt nnMaxBatchSize=64, 498.0 req/s)`: another run, as the verdict names it."""
    value, _, _, unit = _value(c, selection)
    shown = f"{value:.1f} {unit}" if value is not None and math.isfinite(value) else f"no {unit}"
    return f"{c.run_id[:8]} ({_config(c)}, {shown})"


def over_text(selection: Selection) -> str:
    """Why the winner, read from the decision: over whom, and for what reason."""
    winner, decision = selection.winner, selection.decision
    if winner is None or decision is None:
        return ""
    eligible = [c for c in selection.eligible if c.run_id != winner.run_id]
    total = len(selection.verdicts)
    if not eligible:
        if total == 1:
            return "the only run"
        reasons = Counter(v.reason for v in selection.verdicts if v.reason)
        others = ", ".join(f"{count} {reason}" for reason, count in reasons.most_common(3))
        return f"the only run of {total} the rule admits (the others: {others})"
    by_id = {c.run_id: c for c in selection.eligible}
    tied = [by_id[run_id] for run_id in decision.tied if run_id != winner.run_id and run_id in by_id]
    if tied:
        named = ", ".join(describe(c, selection) for c in tied[:_SHOWN_TIED])
        more = f" and {len(tied) - _SHOWN_TIED} more" if len(tied) > _SHOWN_TIED else ""
        if winner.run_id == decision.leader:  # no tail better beyond the noise: the higher value stands
            why = f"for the highest {_metric(selection)} among {len(tied) + 1} runs tied within the noise (p99s alike)"
        else:
            why = (
                f"for its p99 (the leader's over {P99_MARGIN:.0%} above it) among {len(tied) + 1} runs tied "
                "within the noise"
            )
        return f"over {named}{more} {why}"
    runner_up = max(eligible, key=lambda c: _value(c, selection)[0] or -math.inf)
    return f"over {describe(runner_up, selection)} for the highest {_metric(selection)} beyond the noise"


def _metric(selection: Selection) -> str:
    return {"goodput": "goodput", "turns_per_s": "turns/s"}.get(selection.objective, "req/s")


def verdict_line(selection: Selection, verb: str = "promoted") -> str:
    """`{verb} run ID: CONFIG VALUE +-X%, p99 P ms, over Y for reason Z`; '' without a winner."""
    winner = selection.winner
    if winner is None:
        return ""
    value, low, high, unit = _value(winner, selection)
    figure = f"{value:.1f} {unit}" if value is not None and math.isfinite(value) else f"no {unit}"
    if value and low is not None and high is not None and math.isfinite(low) and math.isfinite(high) and high > low:
        figure += f" +-{(high - low) / 2 / value * 100:.1f}%"
    p99 = f"p99 {winner.p99_ms:.0f} ms" if winner.p99_ms is not None and math.isfinite(winner.p99_ms) else "no p99"
    why = over_text(selection)
    smoke = f"; {SMOKE_NOTE}" if winner.extra.get("load") == LOAD_SMOKE else ""
    return f"{verb} run {winner.run_id[:8]}: {_config(winner)} {figure}, {p99}" + (f", {why}" if why else "") + smoke
