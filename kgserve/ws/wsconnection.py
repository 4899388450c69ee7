"""One WebSocket connection's queries: intake, actions, the engine streams, and the bounded send side.

The rules a client sees are in kgserve.ws.websocket; the per-query checks are the ones POST /analysis uses
(kgserve.http.intake.classify_safely, kgserve.http.limits.check_query, kgserve.http.priority.apply_class), except that
visits over the cap are always clamped, with a warning line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from kgserve.engine.errors import failure_text
from kgserve.http.context import ServeContext
from kgserve.http.intake import classify_safely
from kgserve.http.limits import CheckedQuery, check_query, search_visits
from kgserve.http.metrics import Metrics
from kgserve.http.priority import PriorityClass, apply_class
from kgserve.katago.protocol import KNOWN_ACTIONS, Query, Rejected, dump_compact, error_line, split_body

__all__ = ["ACTIONS", "Connection"]

ACTIONS = ("terminate", "terminate_all", "query_version")
TURNS_ERROR = "If provided, must be an array of integers indicating turns to terminate"
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
        self.send_limit = settings.websocket.send_buffer_bytes
        self.running: dict[int, _Running] = {}
        self.counts = {"messages": 0, "queries": 0, "rejected": 0, "refused": 0}
        self._next = 0
        self._outbox: asyncio.Queue[bytes] = asyncio.Queue()
        self._buffered = 0
        self._overflow = asyncio.Event()
        self._closed = False

    # -- the exchange ------------------------------------------------------------------------------------
    async def run(self) -> str:
        """Serve the connection until the client closes it or stops reading; the outcome."""
        sender = asyncio.create_task(self._send_loop())
        receiver = asyncio.create_task(self._receive_loop())
        overflow = asyncio.create_task(self._overflow.wait())
        tasks: tuple[asyncio.Task[Any], ...] = (sender, receiver, overflow)
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._overflow.is_set():
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

    async def _send_loop(self) -> None:
        while True:
            item = await self._outbox.get()
            await self.websocket.send_text(item.decode("utf-8", errors="replace"))
            self._buffered -= len(item)

    def _send(self, line: bytes) -> None:
        if self._closed:
            return
        if self._buffered and self._buffered + len(line) > self.send_limit:  # one line always fits
            self._overflow.set()
            return
        self._buffered += len(line)
        self._outbox.put_nowait(line)

    async def _cut_off(self) -> None:
        self._closed = True
        self._abort_all(None)
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5):
                await self.websocket.close(1008, NOT_READING)

    async def shutdown(self) -> None:
        """The connection is over: every query still running is terminated."""
        self._closed = True
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
                if item.caller_id is not None and self._action(line, item):
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

    def _abort(self, stream: Any, turns: list[int] | None) -> None:
        pool = self.ctx.pool
        if pool is None:
            return
        with contextlib.suppress(Exception):  # an engine that is gone has nothing left to terminate
            if turns is None:
                pool.abort(stream)
            else:
                pool.abort(stream, turns)

    def _abort_all(self, caller_id: str | None, turns: list[int] | None = None) -> None:
        for running in list(self.running.values()):
            if caller_id is None or running.query.caller_id == caller_id:
                self._abort(running.stream, turns)

    # -- actions -----------------------------------------------------------------------------------------
    def _action(self, line: bytes, rejected: Rejected) -> bool:
        """Handle an action line; False when the line is no action kgserve knows (its error line stands)."""
        try:
            body = json.loads(line)
        except ValueError:
            return False
        action = body.get("action") if isinstance(body, dict) else None
        if not isinstance(action, str) or action not in KNOWN_ACTIONS:
            return False
        caller_id = rejected.caller_id
        if action not in ACTIONS:
            message = f"kgserve: the '{action}' action is not available here (only {', '.join(ACTIONS)})"
            self._send(error_line(message, caller_id=caller_id, field="action"))
        elif action == "query_version":
            self._send(self._version(body))
        else:
            self._terminate(action, body)
        return True

    def _version(self, body: dict[str, Any]) -> bytes:
        pool = self.ctx.pool
        status = pool.status() if pool is not None else {}
        version = status.get("katago_version")
        if version is None:
            return error_line("kgserve: no engine has started yet", caller_id=body["id"], field="action")
        answer = {**body, "git_hash": getattr(pool, "katago_git_hash", None) or "", "version": version}
        return dump_compact(answer).encode("utf-8")

    def _terminate(self, action: str, body: dict[str, Any]) -> None:
        caller_id: str = body["id"]
        target: str | None = None
        if action == "terminate":
            target = body.get("terminateId")
            if not isinstance(target, str):
                message = 'Requests for a terminate action must have a string "terminateId" field'
                self._send(error_line(message, caller_id=caller_id, field="terminateId"))
                return
        turns: list[int] | None = None
        if "turnNumbers" in body:
            value = body["turnNumbers"]
            if not isinstance(value, list) or not all(type(turn) in (int, float, bool) for turn in value):
                self._send(error_line(TURNS_ERROR, caller_id=caller_id, field="turnNumbers"))
                return
            turns = [int(turn) for turn in value]
        if action == "terminate":
            self._abort_all(target, turns)
        else:
            self._abort_all(None, turns)
        self._send(dump_compact(body).encode("utf-8"))  # KataGo acknowledges with the request itself
