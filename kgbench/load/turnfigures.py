"""Pure: a level's figures in analysed turns (kgbench.load.turns counts them as their final lines arrive): turns/s
with its interval from the windows, visits/s, ms per turn per request, and per traffic kind for mixed traffic."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kgbench.load.interval import mean_interval
from kgbench.load.latency import percentile
from kgbench.load.types import LevelSummary, RequestRecord

__all__ = ["TurnEvent", "by_kind", "merge_turn_figures", "turn_figures"]


@dataclass(frozen=True)
class TurnEvent:
    done_s: float  # run-relative seconds its final line arrived
    visits: int
    kind: str  # the traffic kind of the request it answered


def _percentile(values: Sequence[float], q: float) -> float:
    return percentile(sorted(values), q) if values else math.nan


def _per_turn_ms(records: Sequence[RequestRecord]) -> list[float]:
    return [r.latency_ms / r.turns for r in records if r.error is None and r.phase == "measure" and r.turns > 0]


def _in_span(events: Sequence[TurnEvent], start: float | None, duration_s: float) -> list[TurnEvent]:
    if start is None:
        return []
    return [e for e in events if start <= e.done_s < start + duration_s]


def by_kind(
    records: Sequence[RequestRecord], events: Sequence[TurnEvent], start: float | None, duration_s: float
) -> dict[str, dict[str, float]]:
    """Per traffic kind (mixed traffic): requests/s, turns/s, p50/p99 ms, ms per turn, over the level's windows."""
    measured = _in_span(events, start, duration_s)
    kinds = sorted({r.kind for r in records} | {e.kind for e in measured})
    out: dict[str, dict[str, float]] = {}
    for kind in kinds:
        ok = [r for r in records if r.kind == kind and r.phase == "measure" and r.error is None]
        latencies = [r.latency_ms for r in ok]
        turns = sum(1 for e in measured if e.kind == kind)
        out[kind] = {
            "req_per_s": len(ok) / duration_s if duration_s > 0 else 0.0,
            "turns_per_s": turns / duration_s if duration_s > 0 else 0.0,
            "p50_ms": _percentile(latencies, 50),
            "p99_ms": _percentile(latencies, 99),
            "turn_p50_ms": _percentile(_per_turn_ms(ok), 50),
        }
    return out


def turn_figures(
    summary: LevelSummary,
    records: Sequence[RequestRecord],
    events: Sequence[TurnEvent],
    window_turns: Sequence[int],
    counts_turns: bool,
) -> LevelSummary:
    """``summary`` (kgbench.load.latency.summarise_level) with its turn figures; when the traffic counts turns, its
    visits/s are the visits of the turns completed in the windows (a request's own may span several levels)."""
    start = summary.measure_spans[0][0] if summary.measure_spans else None
    duration = summary.duration_s
    windows = summary.windows
    window_s = duration / windows if windows else 0.0
    per_window = (
        [(window_turns[w] if w < len(window_turns) else 0) / window_s for w in range(windows)] if window_s else []
    )
    done = _in_span(events, start, duration)
    rate = len(done) / duration if duration > 0 else math.nan
    ci = mean_interval(per_window).containing(rate) if per_window else None
    per_turn = _per_turn_ms(records)
    extra: dict[str, object] = dict(
        turns=len(done),
        turns_per_s=rate,
        turns_per_s_low=ci.low if ci else math.nan,
        turns_per_s_high=ci.high if ci else math.nan,
        window_turns_per_s=tuple(per_window),
        turn_p50_ms=_percentile(per_turn, 50),
        turn_p99_ms=_percentile(per_turn, 99),
    )
    if counts_turns:
        extra["visits_per_s"] = sum(e.visits for e in done) / duration if duration > 0 else 0.0
    if len({r.kind for r in records}) > 1:
        extra["by_kind"] = by_kind(records, events, start, duration)
    return dataclasses.replace(summary, **extra)  # type: ignore[arg-type]


def merge_turn_figures(
    merged: LevelSummary, repeats: Sequence[LevelSummary], records: Sequence[RequestRecord]
) -> LevelSummary:
    """A level measured several times: turns summed, turns/s over the summed durations, the interval from the
    repeats' own turns/s; per kind, each figure weighted by the repeats' durations."""
    duration = sum(s.duration_s for s in repeats)
    turns = sum(s.turns for s in repeats)
    rate = turns / duration if duration > 0 else math.nan
    ci = mean_interval([s.turns_per_s for s in repeats]).containing(rate)
    kinds: dict[str, dict[str, float]] = {}
    for s in repeats:
        for kind, figures in s.by_kind.items():
            into = kinds.setdefault(kind, {})
            for name, value in figures.items():
                into[name] = into.get(name, 0.0) + value * s.duration_s / duration
    visits = sum(s.visits_per_s * s.duration_s for s in repeats) / duration if duration > 0 else 0.0
    per_turn = _per_turn_ms(records)
    return dataclasses.replace(
        merged,
        turns=turns,
        turns_per_s=rate,
        turns_per_s_low=ci.low,
        turns_per_s_high=ci.high,
        window_turns_per_s=tuple(w for s in repeats for w in s.window_turns_per_s),
        visits_per_s=visits,
        turn_p50_ms=_percentile(per_turn, 50),
        turn_p99_ms=_percentile(per_turn, 99),
        by_kind=_finite(kinds),
    )


def _finite(kinds: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    return {k: {n: v for n, v in f.items() if math.isfinite(v)} for k, f in kinds.items()}
