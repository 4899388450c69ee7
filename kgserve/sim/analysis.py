"""The simulated analysis engine loop: stdin lines in, KataGo's response lines out, timed by the throughput model.

One thread reads stdin into a queue; the main thread owns all state. Searches advance in rounds: a round
lasts until the next completion or partial report (at most ROUND_MAX_WALL of wall time) or until a new line
arrives, progresses every active search at the model's steady rate, and first reserves the device time it
needs on the shared simulated device; when other processes hold the device, the round simply ends later.
"""

from __future__ import annotations

import heapq
import os
import queue
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from kgserve.katago._nlohmann import nlohmann_int
from kgserve.katago.protocol import (
    KNOWN_ACTIONS,
    TERMINATE_ID_ERROR,
    TURN_NUMBERS_ERROR,
    Query,
    classify_line,
    dump_compact,
)
from kgserve.sim.model.nncache import NNCacheModel, cache_speedup
from kgserve.sim.model.throughput import SharedDevice, SimParams, Steady, query_overhead_s, steady_state
from kgserve.sim.queries import Defaults, Request, error_for, parse_query
from kgserve.sim.responses import no_results, render_analysis
from kgserve.sim.startup import GIT_HASH, VERSION, Knobs, Log

__all__ = ["Engine"]

ROUND_MAX_WALL = 0.05
_EOF = object()


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


class Engine:
    def __init__(
        self,
        params: SimParams,
        knobs: Knobs,
        defaults: Defaults,
        model_info: dict[str, Any],
        perspective: str,
        log: Log,
    ) -> None:
        self.p = params
        self.k = knobs
        self.defaults = defaults
        self.model_info = model_info
        self.perspective = perspective
        self.log = log
        self.device = SharedDevice(knobs.device)
        self.pending: list[tuple[int, int, Request]] = []
        self.active: list[Search] = []
        self.seq = 0
        self.sim_now = 0.0
        self.cache = NNCacheModel(params.cache_pow)
        self.rows = 0.0
        self.batches = 0.0
        self.out = sys.stdout.buffer
        self.lines: queue.Queue[object] = queue.Queue()
        self._round: tuple[float, float, float, float, float, Steady] | None = None  # start, end, dt_sim, dev_s, dev_e
        self._clock: float | None = None  # wall time up to which searches have been advanced

    # ---- output -------------------------------------------------------------------------------------------
    def emit(self, line: str) -> None:
        try:
            self.out.write(line.encode("utf-8") + b"\n")
            self.out.flush()
        except BrokenPipeError:  # the reader is gone: die quietly, as KataGo does on SIGPIPE
            os._exit(141)
        if line.startswith('{"error"'):
            self.log.write("Error: " + line)
        elif '"warning":' in line and line.startswith('{"field"'):
            self.log.write("Warning: " + line)

    # ---- main loop ----------------------------------------------------------------------------------------
    def _reader(self) -> None:
        for raw in sys.stdin.buffer:
            self.lines.put(raw)
        self.lines.put(_EOF)

    def run(self) -> tuple[int, int]:
        threading.Thread(target=self._reader, daemon=True).start()
        eof = False
        while True:
            self._start_searches()
            if eof and not self.active and not self.pending:
                break
            if not self.active:
                self._clock = None
            elif self._round is None:
                self._begin_round()
            if eof:
                assert self._round is not None
                time.sleep(max(0.0, self._round[1] - time.time()))
                self._end_round(time.time())
                continue
            timeout = None if self._round is None else max(0.0, self._round[1] - time.time())
            try:
                item: object = self.lines.get(timeout=timeout)
            except queue.Empty:
                item = None
            if self._round is not None and item is None:
                self._end_round(time.time())
            if item is _EOF:
                eof = True
            elif isinstance(item, bytes):
                self.handle_line(item)
        return round(self.rows), round(self.batches)

    # ---- rounds -------------------------------------------------------------------------------------------
    def _rate(self, steady: Steady, s: Search) -> float:
        if self.k.fixed_rps is not None:
            return s.target * self.k.fixed_rps / max(1, len(self.active))
        return steady.visits_per_search * s.rate_boost

    def _begin_round(self) -> None:
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

    def _end_round(self, now: float) -> None:
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
        finished = []
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
                    self.emit(render_analysis(s.req, int(s.done), True, self.k.seed, self.perspective))
                s.next_report += s.req.report_every or 1e30
        self.rows += rows
        self.cache.wrote(rows)
        batch = steady.batch if self.k.fixed_rps is None else min(self.p.max_batch, len(self.active))
        self.batches += rows / max(1.0, batch)
        for s in finished:
            self._finish(s, int(s.target))

    def _finish(self, s: Search, visits: int) -> None:
        self.active.remove(s)
        self.cache.finish(s.req.cache_key, visits)
        if visits >= 1:
            self.emit(render_analysis(s.req, visits, False, self.k.seed, self.perspective))
        else:
            self.emit(no_results(s.req))

    def _start_searches(self) -> None:
        while self.pending and len(self.active) < self.p.analysis_threads:
            if self._round is not None:
                self._end_round(time.time())
            _, _, req = heapq.heappop(self.pending)
            target = float(req.max_visits)
            # what the table already holds of this search: the same position, the move before or after it
            hit = self.cache.start(req.cache_key, req.parent_key, target, len(self.active) + 1)
            fixed = self.k.fixed_rps is not None
            jitter = 0.9 + 0.2 * ((req.seq * 2654435761 + self.k.seed) % 1000) / 1000.0
            s = Search(
                req,
                target,
                jitter * cache_speedup(self.p.device, hit),
                0.0 if fixed else query_overhead_s(self.p),
                started_sim=self.sim_now,
                miss=1.0 - hit,
            )
            if req.report_every is not None and req.first_report is not None:
                s.next_report = self.sim_now + req.first_report
            self.cache.follow(req.cache_key, s.progress)
            self.active.append(s)
            if fixed and self.k.fixed_rps == 0:
                self._finish(s, req.max_visits)

    # ---- requests -----------------------------------------------------------------------------------------
    def handle_line(self, raw: bytes) -> None:
        if not raw.strip():
            return
        result = classify_line(raw)
        if isinstance(result, Query):
            self._enqueue(parse_query(result.body, self.defaults, self.emit))
        elif result.action is not None and result.action["action"] in KNOWN_ACTIONS:
            self._action(result.action)
        else:  # not JSON, not an object, no string id, an unknown action: KataGo's error line without an id
            self.emit(result.error_line.decode("utf-8"))

    def _enqueue(self, requests: list[Request]) -> None:
        if self._round is not None:
            self._end_round(time.time())
        for req in requests:
            self.seq += 1
            req.seq = self.seq
            heapq.heappush(self.pending, (-req.priority, self.seq, req))

    def _action(self, body: dict[str, Any]) -> None:
        action, caller_id = body["action"], body["id"]
        if action == "query_version":
            self.emit(dump_compact({**body, "version": VERSION, "git_hash": GIT_HASH}))
        elif action == "query_models":
            self.emit(dump_compact({**body, "models": [self.model_info]}))
        elif action == "clear_cache":
            self.cache.clear()
            self.emit(dump_compact(body))
        elif action in ("terminate", "terminate_all"):
            target_id = body.get("terminateId")
            if action == "terminate" and not isinstance(target_id, str):
                self.emit(
                    error_for(
                        caller_id,
                        "terminateId",
                        TERMINATE_ID_ERROR,
                    )
                )
                return
            turns: set[int] | None = None
            if "turnNumbers" in body:
                value = body["turnNumbers"]
                if not isinstance(value, list) or not all(type(v) in (int, float, bool) for v in value):
                    self.emit(error_for(caller_id, "turnNumbers", TURN_NUMBERS_ERROR))
                    return
                turns = {nlohmann_int(v) for v in value}  # get<vector<int>>: C++ casts
            self._terminate(target_id if action == "terminate" else None, turns, body)

    def _terminate(self, target_id: str | None, turns: set[int] | None, body: dict[str, Any]) -> None:
        def matches(req: Request) -> bool:
            return (target_id is None or req.id == target_id) and (turns is None or req.turn in turns)

        if self._round is not None:
            self._end_round(time.time())
        kept = []
        for item in sorted(self.pending, key=lambda it: it[2].seq):
            if matches(item[2]):
                self.emit(no_results(item[2]))
            else:
                kept.append(item)
        self.pending = kept
        heapq.heapify(self.pending)
        stopped = [s for s in self.active if matches(s.req)]
        self.emit(dump_compact(body))
        for s in stopped:
            self._finish(s, int(s.done))
