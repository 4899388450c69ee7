"""Which engine stdout line belongs to whom: internal ids, the query streams, the internal actions.

A query goes to the engine under a fresh internal id (`kgq<N>`), so two callers' equal ids never meet; each line
back is found by a byte search for its id (kgserve.katago.protocol.locate_id), given to that query's stream with
the caller's id restored byte for byte, and the stream is settled after one `isDuringSearch:false` line per
analysed turn (`noResults` lines included) or an error line for it. Actions kgserve sends itself (`kga<N>`:
query_version, query_models, terminate, terminate_all) are answered through a future, or not awaited.

`outstanding_visits`: requested visits x turns of the queries not yet finished (the pool sends a query to the
engine with the fewest). Nothing here touches a process: lines go out through `send`.

A query may be held back in kgserve rather than written (kgserve.engine.dispatch: the engine's last threads are
kept for clients holding little); it is written when a thread frees. To its client it is a query queued inside
KataGo: a terminate answers KataGo's `noResults` line per turn at once, the engine's death ends it with EngineDied.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import Callable
from typing import Any

from kgserve.engine.dispatch import Dispatch, ThreadReserve
from kgserve.engine.errors import AbortTimeout, EngineDied
from kgserve.engine.stream import QueryStream, StreamOwner
from kgserve.katago.protocol import (
    Query,
    analysed_turns,
    engine_line,
    line_kind,
    locate_id,
    no_results_line,
    restore_id,
)

__all__ = ["Router"]

log = logging.getLogger("kgserve.engine")
_ids = itertools.count(1)  # process-wide: an internal id is never reused, not even across restarts


class Router:
    """The queries and actions in flight on one engine, and the routing of its stdout lines to them."""

    def __init__(
        self,
        owner: StreamOwner,
        send: Callable[[bytes], None],
        *,
        label: str,
        default_visits: int,
        abort_timeout_s: float,
        thread_reserve: ThreadReserve | None = None,
    ) -> None:
        self.owner = owner  # what a stream's abort goes back to (the Engine)
        self.label = label
        self.default_visits = default_visits  # cost of a query without an integer maxVisits
        self.abort_timeout_s = abort_timeout_s
        self.outstanding_visits = 0
        self.counters = {
            "queries": 0,
            "finished": 0,
            "died": 0,
            "aborted": 0,
            "lines": 0,
            "unrouted": 0,
            "partial_dropped": 0,  # partial lines a front end's per-client cap held back (QueryStream.partial_gate)
        }
        self._send = send
        self.dispatch = Dispatch(thread_reserve)
        self._streams: dict[bytes, QueryStream] = {}
        self._actions: dict[bytes, asyncio.Future[bytes] | None] = {}

    @property
    def pending(self) -> int:
        return len(self._streams)

    @property
    def held(self) -> int:
        """Queries held back in kgserve (kgserve.engine.dispatch), of `pending`."""
        return self.dispatch.held

    # -- queries -------------------------------------------------------------------------------------------
    def submit(self, query: Query, client: str | None = None) -> QueryStream:
        """Send a query (held back first when the engine's threads are not free for `client`)."""
        internal = f"kgq{next(_ids)}"
        visits = query.visits if query.visits is not None and query.visits > 0 else self.default_visits
        stream = QueryStream(self.owner, query, internal, visits)
        stream.client = client
        self._run(stream)
        return stream

    def _run(self, stream: QueryStream) -> None:
        self._streams[stream.internal_id.encode()] = stream
        self.outstanding_visits += stream.outstanding_visits
        self.counters["queries"] += 1
        if self.dispatch.admit(stream):
            self._write(stream)

    def _write(self, stream: QueryStream) -> None:
        self._send(engine_line(stream.query, stream.internal_id))
        if stream.deferred_turns:  # turns terminated while it was held: KataGo answers them as queued ones
            self.send_action("terminate", wait=False, terminateId=stream.internal_id, turnNumbers=stream.deferred_turns)
            stream.deferred_turns = []

    def _pump(self) -> None:
        """Threads freed: write the held-back queries now allowed."""
        if self.dispatch.held:
            for stream in self.dispatch.ready():
                self._write(stream)

    def detach_unstarted(self) -> list[QueryStream]:
        """Take off the queries that have had no line yet and are not being aborted (for another engine); the
        engine is sent a terminate for each it was given, in case it wakes up."""
        taken = [stream for stream in self._streams.values() if not stream.started and not stream.aborted]
        for stream in taken:
            if not stream.held:
                self.send_action("terminate", wait=False, terminateId=stream.internal_id)
            del self._streams[stream.internal_id.encode()]
            self.outstanding_visits -= stream.outstanding_visits
            self._off_engine(stream)
        return taken

    def _off_engine(self, stream: QueryStream) -> None:
        """The query leaves this engine: its threads are free, or it leaves the held-back queue."""
        if stream.held:
            self.dispatch.forget(stream)
        else:
            self.dispatch.release(stream, stream.running_turns)

    def adopt(self, stream: QueryStream) -> None:
        """Run a query another engine's router gave up (detach_unstarted), under a fresh internal id."""
        stream.engine = self.owner
        stream.internal_id = f"kgq{next(_ids)}"
        self._run(stream)

    def terminate(self, stream: QueryStream, turns: list[int] | None = None) -> None:
        """KataGo `terminate` for the stream's query (only `turns` of it, when given): its last lines still come.
        A whole query is given up with AbortTimeout when they do not come within abort_timeout_s.
        A held-back query is answered here as KataGo answers a queued one (its turns: once it is written)."""
        if stream.held:
            if turns is not None:
                stream.deferred_turns.extend(turns)
            else:
                self.dispatch.forget(stream)
                self._answer_unstarted(stream)
            return
        if turns is not None:
            self.send_action("terminate", wait=False, terminateId=stream.internal_id, turnNumbers=turns)
            return
        self.send_action("terminate", wait=False, terminateId=stream.internal_id)
        stream._abort_timer = asyncio.get_running_loop().call_later(self.abort_timeout_s, self._abort_expired, stream)

    def _answer_unstarted(self, stream: QueryStream) -> None:
        """KataGo's answer to a terminated query that never started: `noResults` for each analysed turn."""
        for turn in sorted(analysed_turns(stream.query.body)):
            stream._push(no_results_line(stream.caller_id_json, turn))
        self.settle(stream, None)

    def terminate_held(self) -> None:
        """terminate_all for the held-back queries (the engine is closing): each answered as a queued one."""
        for stream in self.dispatch.drop_held():
            self._answer_unstarted(stream)

    def _abort_expired(self, stream: QueryStream) -> None:
        stream._abort_timer = None
        self.settle(stream, AbortTimeout(f"{self.label} did not answer terminate within {self.abort_timeout_s:g}s"))

    def settle(self, stream: QueryStream, error: BaseException | None) -> None:
        if stream.done:
            return
        self._streams.pop(stream.internal_id.encode(), None)
        self.outstanding_visits -= stream.outstanding_visits
        self._off_engine(stream)
        stream._settle(error)
        self.counters["died" if isinstance(error, EngineDied) else "finished"] += 1
        if not isinstance(error, EngineDied):
            self._pump()

    def fail_all(self, error: EngineDied) -> None:
        """The engine is gone: every stream and every awaited action ends with `error`."""
        self.dispatch.drop_held()  # held-back queries end with `error` too, as KataGo's queued ones would
        for stream in list(self._streams.values()):
            self.settle(stream, error)
        for future in self._actions.values():
            if future is not None and not future.done():
                future.set_exception(error)
        self._actions.clear()

    # -- actions (internal only) ---------------------------------------------------------------------------
    def send_action(self, action: str, *, wait: bool, **fields: Any) -> asyncio.Future[bytes] | None:
        """Send an action under a fresh internal id; with `wait`, a future for the engine's answer line."""
        internal = f"kga{next(_ids)}"
        future: asyncio.Future[bytes] | None = asyncio.get_running_loop().create_future() if wait else None
        self._actions[internal.encode()] = future
        payload = {"id": internal, "action": action, **fields}
        self._send((json.dumps(payload, separators=(",", ":")) + "\n").encode())
        return future

    # -- stdout --------------------------------------------------------------------------------------------
    def route(self, line: bytes) -> None:
        """One stdout line of the engine (no newline) to its query stream or action."""
        self.counters["lines"] += 1
        span = locate_id(line)
        key = line[span[0] : span[1]] if span is not None else b""
        stream = self._streams.get(key) if span is not None else None
        if stream is not None and span is not None:
            kind = line_kind(line, span[1])
            if kind == "partial" and stream.partial_gate is not None and not stream.partial_gate(len(line)):
                # dropped, but the engine is searching it: never taken back as unstarted from a frozen engine
                stream.started = True
                self.counters["partial_dropped"] += 1
                return
            stream._push(restore_id(line, span, stream.caller_id_json))
            if kind == "final":
                stream.finals_left -= 1
                self.outstanding_visits -= stream.visits_per_turn
                self.dispatch.release(stream, 1)
                if stream.finals_left <= 0:
                    self.settle(stream, None)
                else:
                    self._pump()
            elif kind == "error":
                self.settle(stream, None)
            return
        if key in self._actions:
            future = self._actions.pop(key)
            if future is not None and not future.done():
                future.set_result(line)
            return
        self.counters["unrouted"] += 1
        log.warning("%s: stdout line for no pending query: %s", self.label, line[:300].decode("utf-8", "replace"))
