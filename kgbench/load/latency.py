"""Pure functions: latency percentiles, per-level summaries, window stability, self-watch verdict."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Sequence

from kgbench.load.interval import mean_interval
from kgbench.load.types import LevelSummary, RequestRecord, SelfWatch


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default) of ascending values; NaN when empty. ``q`` in [0, 100]."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    n = len(sorted_values)
    if n == 0:
        return math.nan
    pos = (n - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac)


def latency_stats(latencies_ms: Sequence[float]) -> tuple[float, float, float, float]:
    """(p50, p90, p99, max) in ms; NaNs when there are no latencies."""
    values = sorted(latencies_ms)
    if not values:
        return (math.nan, math.nan, math.nan, math.nan)
    return (percentile(values, 50), percentile(values, 90), percentile(values, 99), float(values[-1]))


def windows_agree(rates: Sequence[float], count: int, tolerance: float) -> bool:
    """True when the last ``count`` window rates exist and (max - min) / mean <= tolerance.

    A window without any completed request is no measurement: windows with a zero rate never agree.
    """
    if count < 1:
        raise ValueError("count must be >= 1")
    if len(rates) < count:
        return False
    last = rates[-count:]
    mean = sum(last) / count
    if min(last) <= 0:
        return False
    return (max(last) - min(last)) / mean <= tolerance


def window_rates(completions_per_window: Sequence[int], window_s: float) -> tuple[float, ...]:
    """Successful responses per window -> req/s per window."""
    if window_s <= 0:
        raise ValueError("window_s must be > 0")
    return tuple(c / window_s for c in completions_per_window)


def summarise_level(
    records: Sequence[RequestRecord],
    *,
    concurrency: int,
    offered_rate: float | None,
    duration_s: float,
    window_req_per_s: Sequence[float],
    stable: bool,
    slo_ms: float = math.nan,
    measure_start_s: float | None = None,
) -> LevelSummary:
    """Summarise the measured records of one level, one repeat (records of other phases are ignored).
    ``measure_start_s``: when its measurement windows began (run-relative), for the level's measure_spans.

    req/s and visits/s count successful responses completed in the measured ``duration_s``; latency percentiles are
    over successful requests only (errors are counted, not timed); error_rate = errors / all measured requests.
    Goodput counts the successful responses within ``slo_ms``. Both intervals come from the windows.
    """
    measured = [r for r in records if r.phase == "measure"]
    ok = [r for r in measured if r.error is None]
    errors = Counter(r.error for r in measured if r.error is not None)
    p50, p90, p99, mx = latency_stats([r.latency_ms for r in ok])
    visits = sum(r.visits or 0 for r in ok)
    n_err = sum(errors.values())
    windows = len(window_req_per_s)
    window_s = duration_s / windows if windows else 0.0
    good_per_window = [0] * windows
    for r in ok:
        if r.latency_ms <= slo_ms and 0 <= r.window < windows:
            good_per_window[r.window] += 1
    req_per_s = len(ok) / duration_s if duration_s > 0 else 0.0
    goodput = sum(good_per_window) / duration_s if duration_s > 0 and math.isfinite(slo_ms) else math.nan
    rate_ci = mean_interval(window_req_per_s).containing(req_per_s)
    good_ci = mean_interval([g / window_s for g in good_per_window] if window_s > 0 else []).containing(goodput)
    return LevelSummary(
        concurrency=concurrency,
        offered_rate=offered_rate,
        requests=len(measured),
        duration_s=duration_s,
        req_per_s=req_per_s,
        visits_per_s=visits / duration_s if duration_s > 0 else 0.0,
        p50_ms=p50,
        p90_ms=p90,
        p99_ms=p99,
        max_ms=mx,
        error_rate=n_err / len(measured) if measured else 0.0,
        errors=n_err,
        timeouts=errors.get("timeout", 0),
        errors_by_kind=dict(sorted(errors.items())),
        windows=windows,
        window_req_per_s=tuple(window_req_per_s),
        stable=stable,
        req_per_s_low=rate_ci.low,
        req_per_s_high=rate_ci.high,
        slo_ms=slo_ms,
        goodput_per_s=goodput,
        goodput_low=good_ci.low if math.isfinite(slo_ms) else math.nan,
        goodput_high=good_ci.high if math.isfinite(slo_ms) else math.nan,
        measure_spans=((measure_start_s, measure_start_s + duration_s),) if measure_start_s is not None else (),
    )


def merge_repeats(repeats: Sequence[LevelSummary], records: Sequence[RequestRecord]) -> LevelSummary:
    """One level measured several times -> one summary: figures over all repeats' records and durations,
    intervals from the repeats' own req/s and goodput (independent samples, unlike windows). The repeats' window
    indices overlap; only the totals are taken from the merged windows."""
    if not repeats:
        raise ValueError("merge_repeats needs at least one repeat")
    if len(repeats) == 1:
        return repeats[0]
    first = repeats[0]
    merged = summarise_level(
        [r for r in records if r.phase == "measure"],
        concurrency=first.concurrency,
        offered_rate=first.offered_rate,
        duration_s=sum(s.duration_s for s in repeats),
        window_req_per_s=[w for s in repeats for w in s.window_req_per_s],
        stable=all(s.stable for s in repeats),
        slo_ms=first.slo_ms,
    )
    rate_ci = mean_interval([s.req_per_s for s in repeats]).containing(merged.req_per_s)
    good_ci = mean_interval([s.goodput_per_s for s in repeats]).containing(merged.goodput_per_s)
    return dataclasses.replace(
        merged,
        req_per_s_low=rate_ci.low,
        req_per_s_high=rate_ci.high,
        goodput_low=good_ci.low,
        goodput_high=good_ci.high,
        repeats=len(repeats),
        measure_spans=tuple(span for s in repeats for span in s.measure_spans),
    )


def selfwatch_summary(lags_ms: Sequence[float], cpu_seconds: float, wall_seconds: float) -> SelfWatch:
    """Event-loop lag probes (ms over the intended wake-up) and own CPU time over a wall interval."""
    values = sorted(max(0.0, v) for v in lags_ms)
    p99 = percentile(values, 99) if values else 0.0
    return SelfWatch(
        loop_lag_p99_ms=p99,
        loop_lag_max_ms=values[-1] if values else 0.0,
        cpu_share=cpu_seconds / wall_seconds if wall_seconds > 0 else 0.0,
    )


def selfwatch_verdict(watch: SelfWatch, max_loop_lag_ms: float, max_cpu_share: float) -> str | None:
    """None when the load generator kept up; else the one-line reason the run is invalid."""
    reasons = []
    if watch.loop_lag_p99_ms > max_loop_lag_ms:
        reasons.append(
            f"load generator event loop lagged (p99 {watch.loop_lag_p99_ms:.0f} ms > {max_loop_lag_ms:g} ms)"
        )
    if watch.cpu_share > max_cpu_share:
        reasons.append(f"load generator CPU saturated ({watch.cpu_share:.0%} of a core > {max_cpu_share:.0%})")
    return "; ".join(reasons) or None


def merge_selfwatch(watches: Sequence[SelfWatch]) -> SelfWatch | None:
    """The worst of several levels' self-watch figures."""
    if not watches:
        return None
    return SelfWatch(
        loop_lag_p99_ms=max(w.loop_lag_p99_ms for w in watches),
        loop_lag_max_ms=max(w.loop_lag_max_ms for w in watches),
        cpu_share=max(w.cpu_share for w in watches),
    )
