"""The simulated analysis engine loop: stdin lines in, KataGo's response lines out, timed by the throughput model.

One thread reads stdin into a queue; the main thread owns all state. Searches advance in rounds
(kgserve.sim.rounds, the clock); a round also ends early when a new line arrives. This module speaks the
protocol: it parses lines, queues the searches by priority, starts them as analysis threads free up, answers
actions and renders the lines a round makes due.
"""

from __future__ import annotations

import heapq
import os
import queue
import sys
import threading
import time
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
from kgserve.sim.model.throughput import SimParams, query_overhead_s
from kgserve.sim.queries import Defaults, Request, error_for, parse_query
from kgserve.sim.responses import no_results, render_analysis
from kgserve.sim.rounds import Rounds, Search
from kgserve.sim.startup import GIT_HASH, VERSION, Knobs, Log

__all__ = ["Engine"]

_EOF = object()


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
        self.rounds = Rounds(params, knobs)
        self.pending: list[tuple[int, int, Request]] = []
        self.seq = 0
        self.cache = NNCacheModel(params.cache_pow)
        self.out = sys.stdout.buffer
        self.lines: queue.Queue[object] = queue.Queue()

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
        rounds = self.rounds
        eof = False
        while True:
            self._start_searches()
            if eof and not rounds.active and not self.pending:
                break
            if not rounds.active:
                rounds.idle()
            elif not rounds.running:
                rounds.begin()
            if eof:
                time.sleep(max(0.0, rounds.ends_at - time.time()))
                self._end_round(time.time())
                continue
            timeout = max(0.0, rounds.ends_at - time.time()) if rounds.running else None
            try:
                item: object = self.lines.get(timeout=timeout)
            except queue.Empty:
                item = None
            if rounds.running and item is None:
                self._end_round(time.time())
            if item is _EOF:
                eof = True
            elif isinstance(item, bytes):
                self.handle_line(item)
        return round(rounds.rows), round(rounds.batches)

    # ---- searches -----------------------------------------------------------------------------------------
    def _end_round(self, now: float) -> None:
        rows, reports, finished = self.rounds.end(now)
        self.cache.wrote(rows)
        for s in reports:
            self.emit(render_analysis(s.req, int(s.done), True, self.k.seed, self.perspective))
        for s in finished:
            self._finish(s, int(s.target))

    def _finish(self, s: Search, visits: int) -> None:
        self.rounds.active.remove(s)
        self.cache.finish(s.req.cache_key, visits)
        if visits >= 1:
            self.emit(render_analysis(s.req, visits, False, self.k.seed, self.perspective))
        else:
            self.emit(no_results(s.req))

    def _start_searches(self) -> None:
        active = self.rounds.active
        while self.pending and len(active) < self.p.analysis_threads:
            if self.rounds.running:
                self._end_round(time.time())
            _, _, req = heapq.heappop(self.pending)
            target = float(req.max_visits)
            # what the table already holds of this search: the same position, the move before or after it
            hit = self.cache.start(req.cache_key, req.parent_key, target, len(active) + 1)
            fixed = self.k.fixed_rps is not None
            jitter = 0.9 + 0.2 * ((req.seq * 2654435761 + self.k.seed) % 1000) / 1000.0
            s = Search(
                req,
                target,
                jitter * cache_speedup(self.p.device, hit),
                0.0 if fixed else query_overhead_s(self.p),
                started_sim=self.rounds.sim_now,
                miss=1.0 - hit,
            )
            if req.report_every is not None and req.first_report is not None:
                s.next_report = self.rounds.sim_now + req.first_report
            self.cache.follow(req.cache_key, s.progress)
            active.append(s)
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
        if self.rounds.running:
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

        if self.rounds.running:
            self._end_round(time.time())
        kept = []
        for item in sorted(self.pending, key=lambda it: it[2].seq):
            if matches(item[2]):
                self.emit(no_results(item[2]))
            else:
                kept.append(item)
        self.pending = kept
        heapq.heapify(self.pending)
        stopped = [s for s in self.rounds.active if matches(s.req)]
        self.emit(dump_compact(body))
        for s in stopped:
            self._finish(s, int(s.done))
