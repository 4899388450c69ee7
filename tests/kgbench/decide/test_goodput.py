"""Goodput recounted from a run's per-request records at another latency objective (pure)."""

from __future__ import annotations

import pandas as pd
import pytest

from kgbench.decide.goodput import best_goodput, goodput_by_level


def frame(rows: list[tuple[int, str, int, float, str | None, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["level", "phase", "window", "latency_ms", "error", "repeat"])


ROWS = [
    (4, "warmup", -1, 10.0, None, 0),  # warmup: not counted
    (4, "measure", 0, 100.0, None, 0),
    (4, "measure", 0, 900.0, None, 0),
    (4, "measure", 1, 100.0, "timeout", 0),  # an error never counts
    (4, "measure", 1, 200.0, None, 0),
    (16, "measure", 0, 100.0, None, 0),
    (16, "measure", 0, 2000.0, None, 0),
    (16, "measure", 1, 3000.0, None, 0),
    (16, "measure", 1, 150.0, None, 0),
    (16, "measure", 1, 160.0, None, 0),
]


def test_goodput_per_level_and_best() -> None:
    strict = goodput_by_level(frame(ROWS), slo_ms=500.0, window_s=1.0)
    assert strict[4].mean == 1.0 and strict[16].mean == 1.5  # (1 + 1) / 2 s and (1 + 2) / 2 s
    assert strict[16].low < 1.5 < strict[16].high
    loose = goodput_by_level(frame(ROWS), slo_ms=5000.0, window_s=1.0)
    assert loose[4].mean == 1.5 and loose[16].mean == 2.5
    best = best_goodput(frame(ROWS), 500.0, 1.0)
    assert best is not None and best.mean == 1.5
    assert best_goodput(frame([]), 500.0, 1.0) is None
    with pytest.raises(ValueError):
        goodput_by_level(frame(ROWS), slo_ms=0.0, window_s=1.0)


def test_repeats_give_the_interval_and_old_csv_without_repeat_column() -> None:
    rows = [(4, "measure", 0, 100.0, None, r) for r in (0, 0, 1, 1, 1, 1, 2, 2, 2)]
    ci = goodput_by_level(frame(rows), 500.0, 1.0)[4]
    assert ci.mean == 3.0 and ci.n == 3  # 2, 4, 3 per repeat
    old = frame(ROWS).drop(columns=["repeat"])
    assert goodput_by_level(old, 500.0, 1.0)[4].mean == 1.0
