"""Pure summary functions of the load generator."""

from __future__ import annotations

import math

import pytest

from kgbench.load.latency import (
    latency_stats,
    merge_selfwatch,
    percentile,
    selfwatch_summary,
    selfwatch_verdict,
    summarise_level,
    window_rates,
    windows_agree,
)
from kgbench.load.responses import error_kind_for_status, final_visits, outcome_from_response
from kgbench.load.types import RequestRecord, SelfWatch


def rec(latency: float, *, phase: str = "measure", error: str | None = None, visits: int | None = 10) -> RequestRecord:
    return RequestRecord(1, phase, 0, 0.0, latency, 200 if error is None else 0, 100, visits, error, "p")  # type: ignore[arg-type]


def test_percentile_matches_numpy_linear() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 10.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 50) == 3.0
    assert percentile(values, 90) == pytest.approx(7.6)
    assert percentile(values, 100) == 10.0
    assert math.isnan(percentile([], 50))
    with pytest.raises(ValueError):
        percentile(values, 101)


def test_latency_stats_sorts() -> None:
    p50, p90, p99, mx = latency_stats([5.0, 1.0, 3.0])
    assert (p50, mx) == (3.0, 5.0)
    assert p50 <= p90 <= p99 <= mx
    assert all(math.isnan(v) for v in latency_stats([]))


def test_windows_agree() -> None:
    assert windows_agree([50, 100, 101, 99], 3, 0.05)
    assert not windows_agree([100, 101, 80], 3, 0.05)
    assert not windows_agree([100, 100], 3, 0.5)  # too few windows
    assert not windows_agree([0, 0, 0], 3, 0.5)  # nothing completed: no measurement
    assert not windows_agree([10, 0, 10], 3, 10.0)
    assert windows_agree([100, 110, 105], 3, 0.1)
    assert not windows_agree([100, 112, 105], 3, 0.1)
    with pytest.raises(ValueError):
        windows_agree([1], 0, 0.1)


def test_window_rates() -> None:
    assert window_rates([10, 20], 0.5) == (20.0, 40.0)
    with pytest.raises(ValueError):
        window_rates([1], 0)


def test_summarise_level_excludes_warmup_and_counts_errors() -> None:
    records = [rec(1000.0, phase="warmup")] + [rec(float(i)) for i in range(1, 101)]
    records += [rec(0.0, error="timeout"), rec(0.0, error="overload"), rec(0.0, error="timeout")]
    records += [rec(5000.0, phase="drain")]
    s = summarise_level(
        records, concurrency=8, offered_rate=None, duration_s=2.0, window_req_per_s=[50, 50], stable=True
    )
    assert s.requests == 103
    assert s.req_per_s == 50.0
    assert s.visits_per_s == 500.0
    assert s.p50_ms == pytest.approx(50.5) and s.max_ms == 100.0
    assert s.p99_ms == pytest.approx(99.01)
    assert s.errors == 3 and s.timeouts == 2
    assert s.errors_by_kind == {"overload": 1, "timeout": 2}
    assert s.error_rate == pytest.approx(3 / 103)
    assert s.windows == 2 and s.stable and s.concurrency == 8


def test_summarise_empty_level() -> None:
    s = summarise_level([], concurrency=1, offered_rate=5.0, duration_s=1.0, window_req_per_s=[0.0], stable=True)
    assert s.requests == 0 and s.req_per_s == 0.0 and s.error_rate == 0.0 and math.isnan(s.p50_ms)


def test_selfwatch() -> None:
    w = selfwatch_summary([1.0, 2.0, -0.5, 300.0], cpu_seconds=0.5, wall_seconds=1.0)
    assert w.loop_lag_max_ms == 300.0 and w.cpu_share == 0.5
    assert selfwatch_verdict(SelfWatch(5.0, 9.0, 0.3), 100.0, 0.9) is None
    reason = selfwatch_verdict(SelfWatch(150.0, 200.0, 0.95), 100.0, 0.9)
    assert reason is not None and "event loop" in reason and "CPU" in reason
    merged = merge_selfwatch([SelfWatch(1, 50, 0.2), SelfWatch(7, 8, 0.6)])
    assert merged == SelfWatch(7, 50, 0.6)
    assert merge_selfwatch([]) is None


def test_response_outcomes() -> None:
    final = b'{"id":"a","isDuringSearch":false,"rootInfo":{"visits":42},"moveInfos":[]}\n'
    partial = b'{"id":"a","isDuringSearch":true,"rootInfo":{"visits":3}}\n'
    assert final_visits([partial, final, b""]) == (42, None)
    assert final_visits([partial]) == (None, "bad_response")
    assert final_visits([b'{"id":"a","error":"x"}']) == (None, "engine_error")
    assert final_visits([b"not json"]) == (None, "bad_response")
    assert final_visits([]) == (None, "bad_response")
    assert final_visits(
        [b'{"id":"a","isDuringSearch":false,"rootInfo":{"visits":7,"winrate":0.5},"turnNumber":3}']
    ) == (
        7,
        None,
    )
    assert final_visits([b'{"id":"a","isDuringSearch":false,"rootInfo":{"visits":7,']) == (None, "bad_response")
    assert final_visits([b'{"id":"a","isDuringSearch":false,"noResults":true,"turnNumber":3}']) == (
        None,
        "bad_response",
    )
    assert outcome_from_response(200, partial + final).visits == 42
    assert outcome_from_response(200, partial + final).nbytes == len(partial + final)
    assert outcome_from_response(429, b"x").error == "overload"
    assert [error_kind_for_status(s) for s in (200, 400, 413, 503, 500)] == [
        None,
        "client_error",
        "client_error",
        "unavailable",
        "server_error",
    ]
