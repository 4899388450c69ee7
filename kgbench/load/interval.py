"""Confidence intervals of a mean rate, from a few samples (measurement windows, or repeats of a level).

The interval is Student's t at 95%: mean +- t(0.975, n-1) * sd / sqrt(n). Windows of one level are not fully
independent (a request that straddles a boundary counts in one window only, and the engine drifts as it warms),
so the interval is an honest estimate of the run-to-run noise, not a guarantee; repeats (``load.repeats``) give
independent samples. One sample (or none) gives no spread: the interval collapses to the point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["CONFIDENCE", "Interval", "mean_interval", "t_quantile"]

CONFIDENCE = 0.95
# t(0.975, df) for df = 1..30; larger df use the next smaller tabulated df (a slightly wider, safe interval)
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
_T975_LARGE = ((40, 2.021), (60, 2.000), (120, 1.980))
_Z975 = 1.960


def t_quantile(df: int) -> float:
    """The two-sided 95% t quantile for ``df`` degrees of freedom (>= 1)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    value = _T975[-1]
    for bound, quantile in _T975_LARGE:
        if df >= bound:
            value = quantile
    return _Z975 if df > 1000 else value


@dataclass(frozen=True)
class Interval:
    """A mean with its 95% confidence interval; ``n`` samples it came from."""

    mean: float
    low: float
    high: float
    n: int

    def overlaps(self, other: Interval) -> bool:
        """The two intervals share a point: their means are not distinguishable at this confidence."""
        return self.low <= other.high and other.low <= self.high

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0

    def containing(self, value: float) -> Interval:
        """Widened, if need be, to contain ``value`` (the level's own figure: its total over its duration, which
        differs from the samples' mean by rounding, or by the repeats' unequal durations)."""
        if not math.isfinite(value) or not math.isfinite(self.mean):
            return self
        return Interval(self.mean, min(self.low, value), max(self.high, value), self.n)

    @classmethod
    def point(cls, value: float) -> Interval:
        return cls(value, value, value, 1)


def mean_interval(samples: Sequence[float]) -> Interval:
    """The mean of ``samples`` with its 95% t interval (low clipped at 0: a rate is never negative)."""
    values = [float(v) for v in samples if math.isfinite(v)]
    if not values:
        return Interval(math.nan, math.nan, math.nan, 0)
    n = len(values)
    mean = sum(values) / n
    if n == 1:
        return Interval.point(mean)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile(n - 1) * sd / math.sqrt(n)
    return Interval(mean, max(0.0, mean - half), mean + half, n)
