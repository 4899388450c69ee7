"""The simulated engine's clock: its active searches advanced in rounds at the throughput model's steady rate.

A round lasts until the next completion or partial report (at most ROUND_MAX_WALL of wall time); it first reserves
the device time it needs on the shared simulated device, so when other processes hold the device the round simply
ends later. Ending a round (on time, or early when a new line arrives) advances every active search by the time
that passed and says which searches are due a partial report and which finished; the engine (kgserve.sim.analysis)
renders those lines, owns the queue of waiting searches and the NN cache, and speaks the protocol.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kgserve.sim.model.throughput import SharedDevice, SimParams, Steady, steady_state
from kgserve.sim.queries import Request
from kgserve.sim.startup import Knobs

__all__ = ["ROUND_MAX_WALL", "Rounds", "Search"]

ROUND_MAX_WALL = 0.05


@dataclass
class Search:
    req: Request
    target: float
    rate_boost: float  # cache hits and run-to-run jitter
    delay: float
    done: float = 0.0
    started_sim: float = 0.0
    next_report: float | None = None
    miss: float = 1.0  # fraction of visits that need the NN (not in the cache)

    def progress(self) -> float:
        """The share of its visits done (the NN cache model follows a running search by it)."""
        return self.done / max(1.0, self.target)


class Rounds:
    """The active searches, the simulated time they have run, and the NN rows and batches they cost."""

    def __init__(self, params: SimParams, knobs: Knobs) -> None:
        self.p = params
        self.k = knobs
        self.device = SharedDevice(knobs.device)
        self.active: list[Search] = []
        self.sim_now = 0.0
        self.rows = 0.0
        self.batches = 0.0
        self._round: tuple[float, float, float, float, float, Steady] | None = None  # start, end, dt_sim, dev_s, dev_e
        self._clock: float | None = None  # wall time up to which searches have been advanced

    @property
    def running(self) -> bool:
        """A round has begun and not ended."""
        return self._round is not None

    @property
    def ends_at(self) -> float:
        """The wall time the running round ends at."""
        assert self._round is not None
        return self._round[1]

    def idle(self) -> None:
        """No search is active: the next round starts from its own start, not from the last one's end."""
        self._clock = None

    def _rate(self, steady: Steady, s: Search) -> float:
        if self.k.fixed_rps is not None:
            return s.target * self.k.fixed_rps / max(1, len(self.active))
        return steady.visits_per_search * s.rate_boost

    def begin(self) -> None:
        # continue from the end of the previous round: time spent rendering and parsing counts as search time
        now = time.time() if self._clock is None else min(time.time(), self._clock)
        self._clock = None
        steady = steady_state(self.p, len(self.active), int(min(s.target for s in self.active)))
        horizon = ROUND_MAX_WALL * self.k.speed
        for s in self.active:
            rate = self._rate(steady, s)
            left = s.delay + (max(0.0, s.target - s.done) / rate if rate > 0 else 0.0)
            horizon = min(horizon, left)
            if s.next_report is not None:
                horizon = min(horizon, max(0.0, s.next_report - self.sim_now))
        dt = max(horizon, 0.0)
        wall = dt / self.k.speed
        dev_s = dev_e = now
        end = now + wall
        if self.k.fixed_rps is None and steady.device_util > 0 and wall > 0:
            # from the round's start, which may be past: the device sat idle while this process rendered lines
            # (its own last reservation ended by then), so the round's share of it starts there, not now
            dev_s, dev_e = self.device.reserve(steady.device_util * wall, earliest=now)
            end = max(end, dev_e)
        self._round = (now, end, dt, dev_s, dev_e, steady)

    def end(self, now: float) -> tuple[float, list[Search], list[Search]]:
        """End the running round at wall time `now`: (the NN rows it cost, the searches due a partial report with at
        least one visit done, the searches that finished), both lists in the order the searches started."""
        assert self._round is not None
        start, end, dt, dev_s, dev_e, steady = self._round
        self._round = None
        self._clock = now
        # late wake-ups (processing, scheduler) still count as search time, so wall-clock rates stay on the model
        frac = 1.0 if end <= start else min(10.0, max(0.0, (now - start) / (end - start)))
        if frac < 1.0 and dev_e > dev_s:
            self.device.release(dev_e, dev_s + frac * (dev_e - dev_s))
        step = dt * frac
        self.sim_now += step
        # NN rows per visit at this load (wasted evaluations of extra threads included); cache hits need none
        per_visit = steady.evals_per_s / max(1e-9, steady.visits_per_search * len(self.active))
        if self.k.fixed_rps is not None:
            per_visit = 1.0
        rows = 0.0
        reports: list[Search] = []
        finished: list[Search] = []
        for s in self.active:
            use = min(s.delay, step)
            s.delay -= use
            before = s.done
            s.done = min(s.target, s.done + (step - use) * self._rate(steady, s))
            rows += (s.done - before) * per_visit * s.miss
            if s.done >= s.target - 1e-6:
                finished.append(s)
            elif s.next_report is not None and self.sim_now >= s.next_report - 1e-9:
                if s.done >= 1:
                    reports.append(s)
                s.next_report += s.req.report_every or 1e30
        self.rows += rows
        batch = steady.batch if self.k.fixed_rps is None else min(self.p.max_batch, len(self.active))
        self.batches += rows / max(1.0, batch)
        return rows, reports, finished
