"""What the machine samplers share: their thread (`Sampler`), and picking their samples for a time window."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from types import TracebackType
from typing import Generic, Protocol, Self, TypeVar

__all__ = ["Sampler", "SamplerStopped", "bracket"]


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


class SamplerStopped(Exception):
    """Raised by a sampler's `_read` when its source stopped answering: no more samples (those taken stay)."""


class Sampler(Generic[T]):
    """A thread that takes a sample every `interval_s` while the sampler is entered: the first at once, a last one
    after the stop, so a window that ends with the sampler is covered. A subclass reads one sample in `_read` (None:
    dropped, e.g. reads too far apart in time), may prepare in the thread first (`_prepare`: False ends it) and may
    have nothing to sample at all (`_can_sample`: then no thread starts)."""

    thread_name = "sampler"

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.samples: list[T] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _can_sample(self) -> bool:
        return True

    def _prepare(self) -> bool:
        return True

    def _read(self) -> T | None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        if self._can_sample():
            self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        if not self._prepare():
            return
        while True:
            stopping = self._stop.wait(self.interval_s) if self.samples else False
            try:
                sample = self._read()
            except SamplerStopped:
                return
            if sample is not None:
                self.samples.append(sample)
            if stopping:
                return
