"""Intervals of a measured rate, goodput, repeats merged, the auto ladder's stop rule and the knee (pure)."""

from __future__ import annotations

import math

import pytest

from kgbench.load.interval import Interval, mean_interval, t_quantile
from kgbench.load.ladder import knee, next_level, planned_levels
from kgbench.load.latency import merge_repeats, summarise_level
from kgbench.load.types import LevelSummary, LoadSettings, RequestRecord


def rec(window: int, latency: float, *, error: str | None = None, repeat: int = 0) -> RequestRecord:
    return RequestRecord(4, "measure", window, 0.0, latency, 200, 10, 5, error, "p", repeat)


def level(c: int, rps: float, low: float | None = None, high: float | None = None, p99: float = 100.0) -> LevelSummary:
    return LevelSummary(
        c, None, 10, 1.0, rps, 0.0, 1.0, 1.0, p99, p99, 0.0, 0, 0, {}, 3, (rps,), True,
        req_per_s_low=rps if low is None else low, req_per_s_high=rps if high is None else high,
    )  # fmt: skip


def test_mean_interval_is_students_t() -> None:
    ci = mean_interval([9.0, 10.0, 11.0])
    # sd 1, n 3: half width t(2) / sqrt(3) = 4.303 / 1.732
    assert ci.mean == 10.0 and ci.n == 3
    assert ci.high - ci.mean == pytest.approx(4.303 / math.sqrt(3), rel=1e-4)
    assert ci.low == pytest.approx(20.0 - ci.high)
    assert mean_interval([5.0]) == Interval(5.0, 5.0, 5.0, 1)
    assert math.isnan(mean_interval([]).mean)
    assert mean_interval([0.0, 10.0]).low == 0.0  # a rate's interval never goes below zero
    assert t_quantile(1) == 12.706 and t_quantile(45) == 2.021 and t_quantile(5000) == 1.96
    with pytest.raises(ValueError):
        t_quantile(0)


def test_overlap() -> None:
    assert Interval(7.6, 6.9, 8.3, 3).overlaps(Interval(7.33, 7.0, 7.7, 3))
    assert not Interval(10, 9.5, 10.5, 3).overlaps(Interval(8, 7.5, 8.4, 3))
    assert Interval.point(3).overlaps(Interval.point(3))


def test_summary_has_goodput_and_window_interval() -> None:
    # two windows of 1 s: 3 ok (one over the SLO) + 1 error, then 2 ok within
    records = [rec(0, 100), rec(0, 200), rec(0, 2000), rec(0, 50, error="timeout"), rec(1, 100), rec(1, 300)]
    summary = summarise_level(
        records, concurrency=4, offered_rate=None, duration_s=2.0, window_req_per_s=[3.0, 2.0], stable=True,
        slo_ms=1000.0,
    )  # fmt: skip
    assert summary.req_per_s == 2.5 and summary.goodput_per_s == 2.0
    assert summary.req_per_s_low < 2.5 < summary.req_per_s_high
    assert summary.goodput_low == summary.goodput_high == 2.0  # 2 within the SLO in both windows
    no_slo = summarise_level(records, concurrency=4, offered_rate=None, duration_s=2.0, window_req_per_s=[3, 2],
                             stable=True)  # fmt: skip
    assert math.isnan(no_slo.goodput_per_s)


def test_repeats_give_the_interval() -> None:
    reps = []
    records = []
    for r, count in enumerate((4, 5, 6)):
        recs = [rec(0, 100, repeat=r) for _ in range(count)]
        records += recs
        reps.append(summarise_level(recs, concurrency=4, offered_rate=None, duration_s=1.0,
                                    window_req_per_s=[float(count)], stable=True, slo_ms=1000.0))  # fmt: skip
    merged = merge_repeats(reps, records)
    assert merged.repeats == 3 and merged.req_per_s == 5.0 and merged.goodput_per_s == 5.0
    half = 4.303 / math.sqrt(3)  # sd of (4, 5, 6) is 1: the interval comes from the repeats, not the windows
    assert (merged.req_per_s_low, merged.req_per_s_high) == (pytest.approx(5 - half), pytest.approx(5 + half))
    assert (merged.goodput_low, merged.goodput_high) == (pytest.approx(5 - half), pytest.approx(5 + half))
    assert merge_repeats(reps[:1], records) is reps[0]
    with pytest.raises(ValueError):
        merge_repeats([], [])


def test_fixed_ladder_runs_the_list() -> None:
    load = LoadSettings(concurrency=(4, 16))
    assert next_level(load, []).concurrency == 4
    assert next_level(load, [level(4, 1)]).concurrency == 16
    assert next_level(load, [level(4, 1), level(16, 2)]).concurrency is None
    assert planned_levels(load) == 2
    assert next_level(LoadSettings(concurrency=(4, 16), mode="open"), []).concurrency == 16
    highest_first = LoadSettings(concurrency=(4, 64, 16), order="descending")
    assert [next_level(highest_first, [level(0, 1)] * n).concurrency for n in range(4)] == [64, 16, 4, None]


def test_auto_ladder_doubles_until_saturated() -> None:
    load = LoadSettings(concurrency=(4,), ladder="auto", max_concurrency=64)
    assert planned_levels(load) == 5  # 4 8 16 32 64
    assert next_level(load, [level(4, 10, 9, 11)]).concurrency == 8
    rising = [level(4, 10, 9, 11), level(8, 19, 18, 20)]
    assert next_level(load, rising).concurrency == 16
    flat = [*rising, level(16, 20.5, 19.5, 21.5)]  # higher, but within noise of 19 [18, 20]
    step = next_level(load, flat)
    assert step.concurrency is None and step.reason is not None and "saturated" in step.reason
    lower = [*rising, level(16, 15, 14.9, 15.1)]
    assert next_level(load, lower).concurrency is None
    capped = [level(32, 10, 9, 11), level(64, 30, 29, 31)]
    assert next_level(load, capped).reason == "max_concurrency 64 reached"
    assert (
        next_level(LoadSettings(concurrency=(40,), ladder="auto", max_concurrency=64), [level(40, 1)]).concurrency == 64
    )


def test_auto_ladder_stops_on_latency_bound_and_failure() -> None:
    load = LoadSettings(concurrency=(4,), ladder="auto", max_p99_ms=500.0)
    step = next_level(load, [level(4, 10, p99=800.0)])
    assert step.concurrency is None and step.reason is not None and "p99 800 ms > max_p99_ms 500" in step.reason
    assert next_level(load, [level(4, 0.0)]).concurrency is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ladder": "steep"}, "load.ladder"),
        ({"ladder": "auto", "mode": "open"}, "needs load.mode=closed"),
        ({"ladder": "auto", "concurrency": (64,), "max_concurrency": 8}, "below the first level"),
        ({"slo_ms": 0.0}, "load.slo_ms"),
        ({"repeats": 0}, "load.repeats"),
        ({"max_p99_ms": -1.0}, "load.max_p99_ms"),
        ({"order": "shuffled"}, "load.order"),
        ({"order": "descending", "ladder": "auto"}, "needs load.ladder=fixed"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LoadSettings(**kwargs)  # type: ignore[arg-type]


def test_knee_is_the_lowest_level_within_95_percent() -> None:
    levels = [level(4, 10), level(8, 19), level(16, 19.5), level(32, 20)]
    assert knee(levels) == 8  # 19 >= 0.95 * 20
    assert knee([level(4, 0.0)]) is None
    assert knee([]) is None
