"""The thread reserve's sizes (`engine.thread_reserve`, `engine.lend_bound_s`) and one engine's threads in use, with
the estimate of how long a search of N visits takes there now.

KataGo searches at most `numAnalysisThreads` turns at once and never preempts a running search. So per engine the
last `reserve` threads go to clients holding at most `small` threads; while no other client has work waiting in
kgserve, a busy client may borrow them, and `prefetch` turns more that wait inside KataGo's own queue (so a turn
starts the moment a thread frees, without waiting for kgserve to read the answer before and write the next),
but only while a newcomer would wait at most `lend_bound_s` for a thread (KataGo cannot take a lent one back): the
search itself estimated that short, or another running search estimated to end that soon. kgserve.engine.dispatch
applies the rule; docs/http-limits.md has the measurements the sizes come from.

Whether a running search ends soon is read off another figure where there is one, `run_s`: how long searches of the
same visit count took from their start (a turn written to a free thread) to their end, decayed the same way (no
bias but the order in which searches end); otherwise the estimate below.

The estimate is Little's law on the engine's own recent work: thread-seconds spent searching (turns running, at
most `threads` of them) per visit finished, both decayed over the last ~4 x threads finished turns (the searches
still running count their thread-seconds so far and no visits yet: the estimate errs long, by ~1/8 at a steady
load); a search of V visits then takes about V times that. A turn ended by a terminate counts no visits (the
estimate errs long again: less lending, never more); before a first turn has finished there is no estimate and
nothing is lent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["RUNS_KEPT", "EngineLoad", "ThreadReserve", "thread_reserve"]

RUNS_KEPT = 8  # visit counts whose run time an engine remembers (a client choosing a new count each time: bounded)


@dataclass(frozen=True, slots=True)
class ThreadReserve:
    threads: int  # the engine's numAnalysisThreads
    reserve: int  # the last threads, only for clients holding at most `small` (or lent, below)
    small: int
    prefetch: int = 0  # turns written past the threads, into KataGo's queue, while lending
    lend_bound_s: float = 0.0  # lend only while a newcomer would wait at most this for a thread; 0: never lend


def thread_reserve(threads: int | None, share: float, lend_bound_s: float = 0.0) -> ThreadReserve | None:
    """The reserve for an engine of `threads` analysis threads (None: off, or nothing to reserve).

    reserve = share x threads, at least 1 and never every thread; `small` = reserve: a newcomer may take the whole
    reserve (a short burst of queries is answered at once), while a client already holding more than that has had
    its turn; `prefetch` = reserve. With 128 threads and the default 1/16: 8 threads, for clients holding at most 8."""
    if threads is None or threads < 2 or share <= 0:
        return None
    reserve = min(threads - 1, max(1, round(threads * share)))
    return ThreadReserve(threads, reserve, reserve, reserve, max(0.0, lend_bound_s))


class EngineLoad:
    """One engine's turns written and not finished (running, or queued inside KataGo), and its search-time estimate."""

    __slots__ = ("_at", "_busy", "_keep", "_runs", "_visits", "in_engine", "threads")

    def __init__(self, threads: int | None) -> None:
        self.threads = threads or 0  # 0: unknown (no reserve): nothing is estimated
        self.in_engine = 0
        self._busy = 0.0  # decayed thread-seconds searching
        self._visits = 0.0  # decayed visits finished
        self._at = time.monotonic()
        self._keep = 1.0 - 1.0 / max(4, 4 * self.threads)
        # per visit count: decayed seconds from start to end of searches that started on a free thread, and how many
        self._runs: dict[int, tuple[float, float]] = {}

    def _advance(self, now: float) -> None:
        self._busy += min(self.in_engine, self.threads) * (now - self._at)
        self._at = now

    def add(self, turns: int) -> None:
        """`turns` more written to the engine."""
        if self.threads:
            self._advance(time.monotonic())
        self.in_engine += turns

    def finished(self, turns: int, visits: int) -> None:
        """`turns` ended, having searched `visits` (0: terminated, or never searched)."""
        if self.threads:
            self._advance(time.monotonic())
            keep = self._keep**turns
            self._busy *= keep
            self._visits = self._visits * keep + visits
        self.in_engine = max(0, self.in_engine - turns)

    def gone(self, turns: int) -> None:
        """`turns` taken off the engine without an answer (moved elsewhere, given up): nothing to learn from."""
        if self.threads:
            self._advance(time.monotonic())
        self.in_engine = max(0, self.in_engine - turns)

    def ran(self, visits: int, seconds: float) -> None:
        """A search of `visits` that started on a free thread (nothing queued before it in KataGo) ended `seconds`
        after it was written."""
        total, count = self._runs.pop(visits, (0.0, 0.0))
        self._runs[visits] = (total * self._keep + seconds, count * self._keep + 1.0)
        if len(self._runs) > RUNS_KEPT:
            del self._runs[next(iter(self._runs))]  # the visit count that has not ended for the longest

    def run_s(self, visits: int) -> float | None:
        """How long a search of exactly `visits` runs from its start to its end, as such searches did lately; None
        before one has ended. Only the same visit count: the searches that end first are the short ones, so another
        count's (a newcomer's small queries), scaled, would say that a long search still running ends soon."""
        run = self._runs.get(visits)
        return None if run is None else run[0] / run[1]

    def search_s(self, visits: int) -> float | None:
        """About how long a search of `visits` takes on this engine now; None before anything has finished."""
        if self._visits <= 0:
            return None
        return visits * self._busy / self._visits
