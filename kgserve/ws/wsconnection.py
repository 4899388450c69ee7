"""One WebSocket connection's queries: intake, actions (kgserve.ws.actions), the engine streams, and the bounded
send side.

The rules a client sees are in kgserve.ws.websocket; the per-query checks are the ones POST /analysis uses
(kgserve.admission), except that visits over the cap are always clamped, with a warning line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from kgserve.admission.checks import CheckedQuery, check_query, classify_safely, search_visits
from kgserve.admission.priority import PriorityClass, apply_class
from kgserve.context import ServeContext
from kgserve.engine.errors import failure_text
from kgserve.katago.protocol import Query, Rejected, dump_compact, error_line, split_body
from kgserve.metrics import Metrics
from kgserve.ws.actions import ACTIONS, action_body, terminate_request, unavailable, version_answer
from kgserve.ws.sendbuffer import SendBuffer

__all__ = ["ACTIONS", "Connection"]

NOT_READING = "kgserve: the client is not reading its answers"
log = logging.getLogger("kgserve.websocket")


@dataclass
class _Running:
    query: Query
    stream: Any
    task: asyncio.Task[None] | None = None


class Connection:
    def __init__(self, websocket: WebSocket, ctx: ServeContext, metrics: Metrics, klass: PriorityClass) -> None:
        self.websocket = websocket
        self.ctx = ctx
        self.metrics = metrics
        self.klass = klass
        settings = ctx.settings
        self.limits = settings.limits.model_copy(update={"visits_over_cap": "clamp"})
        self.classes = settings.priority.classes
        self.max_inflight = settings.websocket.max_inflight_per_connection
        self.outbox = SendBuffer(websocket, settings.websocket.send_buffer_bytes)
        self.running: dict[int, _Running] = {}
        self.counts = {"messages": 0, "queries": 0, "rejected": 0, "refused": 0}
        self._next = 0

    # -- the exchange ------------------------------------------------------------------------------------
    async def run(self) -> str:
        """Serve the connection until the client closes it or stops reading; the outcome."""
        sender = asyncio.create_task(self.outbox.send_loop())
        receiver = asyncio.create_task(self._receive_loop())
        overflow = asyncio.create_task(self.outbox.overflow.wait())
        tasks: tuple[asyncio.Task[Any], ...] = (sender, receiver, overflow)
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if self.outbox.overflow.is_set():
            await self._cut_off()
            return "not_reading"
        for finished in done:
            error = None if finished.cancelled() else finished.exception()
            if error is not None and not isinstance(error, WebSocketDisconnect | OSError):
                log.error("websocket connection failed: %s: %s", type(error).__name__, error)
                return "error"
        return "closed"

    async def _receive_loop(self) -> None:
        while True:
            message = await self.websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            data = message.get("bytes")
            if data is None:
                data = (message.get("text") or "").encode("utf-8", errors="surrogateescape")
            self.counts["messages"] += 1
            self._handle_message(data)

    def _send(self, line: bytes) -> None:
        self.outbox.put(line)

    async def _cut_off(self) -> None:
        self.outbox.closed = True
        self._abort_all(None)
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5):
                await self.websocket.close(1008, NOT_READING)

    async def shutdown(self) -> None:
        """The connection is over: every query still running is terminated."""
        self.outbox.closed = True
        self._abort_all(None)
        tasks = [running.task for running in self.running.values() if running.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- intake ------------------------------------------------------------------------------------------
    def _handle_message(self, data: bytes) -> None:
        lines = split_body(data)
        limit = self.limits.max_queries_per_request
        if len(lines) > limit:
            message = f"kgserve: {len(lines)} lines in one message, over the limit of {limit}"
            message += " (limits.max_queries_per_request)"
            self._send(error_line(message))
            return
        for line in lines:
            item = classify_safely(line)
            if isinstance(item, Rejected):
                if self._action(item):
                    continue
                self.counts["rejected"] += 1
                self.metrics.websocket_query("rejected")
                self._send(item.error_line)
                continue
            self._admit(item)

    def _admit(self, query: Query) -> None:
        checked = check_query(query, self.limits, self.ctx.cfg_visits)
        if isinstance(checked, Rejected):
            self.counts["rejected"] += 1
            self.metrics.websocket_query("rejected")
            self._send(checked.error_line)
            return
        assert isinstance(checked, CheckedQuery)
        if checked.silent:
            return
        if checked.clamped:
            self._send(self._clamp_warning(query))
        admitted = apply_class(checked.query, self.klass) if self.classes else checked.query
        refusal = self._refusal()
        if refusal is None:
            try:
                assert self.ctx.pool is not None
                stream = self.ctx.pool.submit(admitted)
            except Exception as exc:
                self.ctx.admission.release(1)
                refusal = f"engine unavailable: kgserve could not submit this query ({exc})"
            else:
                self._start(admitted, stream)
                return
        self.counts["refused"] += 1
        self.metrics.websocket_query("refused")
        self._send(error_line(refusal, caller_id=query.caller_id))

    def _refusal(self) -> str | None:
        """Why a query cannot be admitted now (None: admitted, one unit of the server-wide bound taken)."""
        if len(self.running) >= self.max_inflight:
            return (
                f"kgserve: over the limit of {self.max_inflight} queries in flight on this connection "
                "(websocket.max_inflight_per_connection); send it again when one has finished"
            )
        if self.ctx.pool is None:
            return "kgserve: the engine pool is not running"
        if not self.ctx.admission.try_acquire(1):
            return (
                f"kgserve: over the limit of {self.ctx.admission.max_inflight} queries in flight "
                "(limits.max_inflight_queries); retry later"
            )
        return None

    def _clamp_warning(self, query: Query) -> bytes:
        cap = self.limits.max_visits
        asked = search_visits(query, self.ctx.cfg_visits)
        message = f"kgserve: maxVisits {asked} is over the cap of {cap} (limits.max_visits)"
        message += f"; searching {cap} visits"
        # KataGo's warning shape, plus isDuringSearch/noResults: a client that dispatches on isDuringSearch
        # (KaTrain) would otherwise take the warning for the query's final result and stop waiting for it
        line = {"field": "maxVisits", "id": query.caller_id, "isDuringSearch": True, "noResults": True}
        return dump_compact({**line, "warning": message}).encode("utf-8")

    # -- engine side -------------------------------------------------------------------------------------
    def _start(self, query: Query, stream: Any) -> None:
        key = self._next
        self._next += 1
        running = self.running[key] = _Running(query, stream)
        self.counts["queries"] += 1
        running.task = asyncio.create_task(self._pump(key, running))

    async def _pump(self, key: int, running: _Running) -> None:
        outcome = "ok"
        try:
            async for line in running.stream:
                self._send(bytes(line).rstrip(b"\r\n"))
        except asyncio.CancelledError:
            outcome = "terminated"
            raise
        except Exception as exc:
            outcome = "engine_died"
            self._send(error_line(failure_text(exc), caller_id=running.query.caller_id))
        finally:
            self.running.pop(key, None)
            self.ctx.admission.release(1)
            self.metrics.websocket_query(outcome)

    def _abort(self, stream: Any, turns: frozenset[int] | None) -> None:
        pool = self.ctx.pool
        if pool is None:
            return
        with contextlib.suppress(Exception):  # an engine that is gone has nothing left to terminate
            if turns is None:
                pool.abort(stream)
            else:
                pool.abort(stream, turns)

    def _abort_all(self, caller_id: str | None, turns: frozenset[int] | None = None) -> None:
        for running in list(self.running.values()):
            if caller_id is None or running.query.caller_id == caller_id:
                self._abort(running.stream, turns)

    # -- actions -----------------------------------------------------------------------------------------
    def _action(self, item: Rejected) -> bool:
        """Handle an action line; False when the line is no action kgserve knows (its error line stands)."""
        body = action_body(item)
        if body is None:
            return False
        if body["action"] not in ACTIONS:
            self._send(unavailable(body))
        elif body["action"] == "query_version":
            pool = self.ctx.pool
            version = (pool.status() if pool is not None else {}).get("katago_version")
            self._send(version_answer(body, version, getattr(pool, "katago_git_hash", None)))
        else:
            request = terminate_request(body, self.limits.max_turns_per_query)
            if isinstance(request, bytes):
                self._send(request)
            else:
                self._abort_all(request.target, request.turns)
                self._send(request.ack)
        return True
