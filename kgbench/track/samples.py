"""Picking a sampler's samples for a time window."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

__all__ = ["bracket"]


class _Timed(Protocol):
    @property
    def t(self) -> float: ...


T = TypeVar("T", bound=_Timed)


def bracket(samples: Sequence[T], start: float | None, end: float | None) -> list[T]:
    """The samples inside [start, end] plus the nearest one on each side: a window shorter than the sampling
    interval (a short run) still gets a first and a last sample, so counters have a difference to take."""
    if start is None and end is None:
        return list(samples)
    lo = 0 if start is None else max((i for i, s in enumerate(samples) if s.t <= start), default=0)
    hi = (
        len(samples) - 1
        if end is None
        else min((i for i, s in enumerate(samples) if s.t >= end), default=len(samples) - 1)
    )
    return list(samples[lo : hi + 1])
