"""One WebSocket connection: its messages (queries, kgserve.ws.wsqueries; actions, kgserve.ws.actions), its
bounded send side, and how it ends.

The rules a client sees are in kgserve.ws.websocket; the per-query checks are the ones POST /analysis uses
(kgserve.admission), except that visits over the cap are always clamped, with a warning line. It ends when:

- the client closes it: its queries are terminated;
- the client stops reading (its answers pass websocket.send_buffer_bytes or its share of the memory budget):
  its queries are terminated, a close 1008 is tried for a second, and the connection is reset (TCP RST: the
  socket and what waits in it are freed at once, whatever the client does);
- the server shuts down (SIGTERM): new queries are refused with an error line, running ones get the grace
  period (server.grace_period_s) as HTTP requests do, then one error line each for those still running
  (`kgserve is shutting down: this query was terminated`), then the connection is closed with 1001.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from kgserve.admission.checks import classify_all
from kgserve.admission.clients import client_key
from kgserve.admission.priority import PriorityClass
from kgserve.auth import Credential
from kgserve.context import ServeContext
from kgserve.katago.protocol import Rejected, error_line, split_body
from kgserve.metrics import Metrics
from kgserve.ws.actions import ACTIONS, action_body, terminate_request, unavailable, version_answer
from kgserve.ws.pacing import Pacing
from kgserve.ws.sendbuffer import SendBuffer
from kgserve.ws.wsguard import CONNECTION_EXTENSION
from kgserve.ws.wsqueries import SHUTDOWN_TEXT, ConnectionQueries

__all__ = ["ACTIONS", "GOODBYE_S", "Connection"]

NOT_READING = "kgserve: the client is not reading its answers"
GOODBYE_S = 1.0  # the most a closing handshake may take before the connection is reset
log = logging.getLogger("kgserve.websocket")


class Connection:
    def __init__(
        self,
        websocket: WebSocket,
        ctx: ServeContext,
        metrics: Metrics,
        klass: PriorityClass,
        credential: Credential | None = None,
    ) -> None:
        self.websocket = websocket
        self.ctx = ctx
        admission = ctx.admission
        address = websocket.client.host if websocket.client else None
        client = self.client = admission.clients.hold(client_key(address, credential.label if credential else None))
        charge = (lambda size: admission.budget.take(client, size), lambda size: admission.budget.give(client, size))
        self.outbox = SendBuffer(websocket, ctx.settings.websocket.send_buffer_bytes, charge)
        self.queries = ConnectionQueries(ctx, metrics, self.outbox, client, klass, credential)
        self.counts = self.queries.counts
        own_rate = ctx.settings.websocket.max_messages_per_s
        self.pacing = Pacing(own_rate, admission.message_rates, client.key, self.outbox, metrics, self.counts)
        self.stopping = asyncio.Event()  # the server is shutting down
        self._extension: dict[str, Any] = (websocket.scope.get("extensions") or {}).get(CONNECTION_EXTENSION) or {}
        on_shutdown: Callable[[Callable[[], None] | None], None] | None = self._extension.get("on_shutdown")
        if on_shutdown is not None:
            on_shutdown(self.stopping.set)

    # -- the exchange ------------------------------------------------------------------------------------
    async def run(self) -> str:
        """Serve the connection until the client closes it, stops reading, or the server shuts down; the outcome."""
        sender = asyncio.create_task(self.outbox.send_loop())
        receiver = asyncio.create_task(self._receive_loop())
        overflow = asyncio.create_task(self.outbox.overflow.wait())
        stopping = asyncio.create_task(self.stopping.wait())
        tasks: tuple[asyncio.Task[Any], ...] = (sender, receiver, overflow, stopping)
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            if stopping in done and not done & {sender, receiver, overflow}:
                return await self._drain(receiver, overflow)
        except asyncio.CancelledError:  # the server's grace period ran out first: the goodbye in a hurry
            self.queries.cut_short(SHUTDOWN_TEXT)
            self._reset()
            raise
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
            await self._handle_message(data)

    async def _drain(self, receiver: asyncio.Task[None], overflow: asyncio.Task[bool]) -> str:
        """The server shuts down: running queries get the grace period, then an error line each, then 1001."""
        self.queries.accepting = False
        grace = self.ctx.settings.server.grace_period_s
        idle = asyncio.create_task(self.queries.idle.wait())
        try:
            await asyncio.wait((idle, receiver, overflow), timeout=max(0.0, grace - GOODBYE_S / 2))
        finally:
            idle.cancel()
        if receiver.done():
            return "closed"  # the client left: kgserve.ws.websocket terminates what it still had running
        if self.outbox.overflow.is_set():
            await self._cut_off()
            return "not_reading"
        self.queries.cut_short(SHUTDOWN_TEXT)
        await self._goodbye(1001, "kgserve is shutting down")
        return "shutdown"

    async def _goodbye(self, code: int, reason: str) -> None:
        """Send what is queued and a close frame, within GOODBYE_S in all; then the connection is reset if the
        client has not closed its side (a client that does not read cannot hold the socket)."""
        deadline = time.monotonic() + GOODBYE_S
        closed: asyncio.Event | None = self._extension.get("closed")
        with contextlib.suppress(Exception):
            while not self.outbox.empty and time.monotonic() < deadline:  # noqa: ASYNC110 (the sender runs)
                await asyncio.sleep(0.01)
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                await self.websocket.close(code, reason)
                if closed is not None:
                    await closed.wait()  # the client's close frame came: the socket is closed normally
        if closed is None or not closed.is_set():
            self._reset()

    def _reset(self) -> None:
        abort = self._extension.get("abort")
        if abort is not None:
            abort()

    async def _cut_off(self) -> None:
        self.outbox.closed = True
        self.queries.abort_all(None)
        await self._goodbye(1008, NOT_READING)

    async def shutdown(self) -> None:
        """The connection is over: every query still running is terminated; its client and budget let go."""
        self.outbox.closed = True
        try:
            await self.queries.cancel_all()
        finally:
            self.outbox.release()
            self.ctx.admission.clients.let_go(self.client)

    # -- intake ------------------------------------------------------------------------------------------
    async def _handle_message(self, data: bytes) -> None:
        lines = split_body(data)
        limit = self.queries.limits.max_queries_per_request
        await self.pacing.admit(len(lines) if len(lines) <= limit else 1)  # read at the bounds' pace, a turn each
        if len(lines) > limit:
            message = f"kgserve: {len(lines)} lines in one message, over the limit of {limit}"
            message += " (limits.max_queries_per_request)"
            self.outbox.put(error_line(message))
            return
        items = await classify_all(lines, len(data))  # a big message: off the event loop
        for line, item in zip(lines, items, strict=True):
            if isinstance(item, Rejected):
                if not self._action(item):
                    self.queries.reject(item.error_line)
                continue
            self.queries.admit(item, len(line))

    def _action(self, item: Rejected) -> bool:
        """Handle an action line; False when the line is no action kgserve knows (its error line stands)."""
        body = action_body(item)
        if body is None:
            return False
        if body["action"] not in ACTIONS:
            self.outbox.put(unavailable(body))
        elif body["action"] == "query_version":
            pool = self.ctx.pool
            version = (pool.status() if pool is not None else {}).get("katago_version")
            self.outbox.put(version_answer(body, version, getattr(pool, "katago_git_hash", None)))
        else:
            request = terminate_request(body, self.queries.limits.max_turns_per_query)
            if isinstance(request, bytes):
                self.outbox.put(request)
            else:
                self.queries.abort_all(request.target, request.turns)
                self.outbox.put(request.ack)
        return True
