"""Goodput of a finished run at another latency objective, recounted from its per-request records (pure).

A run logs goodput at its own ``load.slo_ms``; promote may ask for a different objective
(``--objective goodput --slo-ms X``). The ``requests.csv`` artifact has every request's level, phase, window,
repeat, latency and error, which is all goodput needs: per level, successful measured requests within X ms per
window (or per repeat, when the level was repeated), with the same interval as the run's own figures.
"""

from __future__ import annotations

import math

import pandas as pd

from kgbench.load.interval import Interval, mean_interval

__all__ = ["best_goodput", "goodput_by_level"]


def goodput_by_level(records: pd.DataFrame, slo_ms: float, window_s: float) -> dict[int, Interval]:
    """Concurrency level -> goodput (req/s within ``slo_ms``) with its 95% interval."""
    if window_s <= 0 or not slo_ms > 0:
        raise ValueError("window_s and slo_ms must be > 0")
    measured = records[records["phase"] == "measure"].copy()
    if "repeat" not in measured.columns:
        measured["repeat"] = 0
    measured["good"] = measured["error"].isna() & (measured["latency_ms"] <= slo_ms)
    out: dict[int, Interval] = {}
    for level, group in measured.groupby("level"):
        per_repeat: list[float] = []
        per_window: list[float] = []
        for _, rep in group.groupby("repeat"):
            windows = int(rep["window"].max()) + 1
            counts = rep[rep["good"]].groupby("window").size().reindex(range(windows), fill_value=0)
            per_window += [float(n) / window_s for n in counts]
            per_repeat.append(float(counts.sum()) / (windows * window_s))
        ci = mean_interval(per_repeat if len(per_repeat) > 1 else per_window)
        total_windows = len(per_window)
        mean = float(group["good"].sum()) / (total_windows * window_s)
        out[int(str(level))] = Interval(mean, min(ci.low, mean), max(ci.high, mean), ci.n)
    return out


def best_goodput(records: pd.DataFrame, slo_ms: float, window_s: float) -> Interval | None:
    """The best level's goodput (None when no level was measured)."""
    levels = goodput_by_level(records, slo_ms, window_s)
    finite = [ci for ci in levels.values() if math.isfinite(ci.mean)]
    return max(finite, key=lambda ci: ci.mean, default=None)
