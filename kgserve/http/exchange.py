"""One POST /analysis request's run: its queries on the engine client, their lines streamed to the client.

What the client sees is described in kgserve.http.analysis. Here: every query is submitted at once, and one
loop takes the events of the request from a channel (a line or the end of a query, from the query streams'
callbacks; the deadline; the terminate grace running out; the client gone or a failed send) until no query is
pending. The status line waits for the first analysis line (or the end); kgserve never awaits a send
(kgserve.http.outbox): a client that does not read is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterable
from typing import Any, Generic, Protocol, TypeVar

from starlette.types import Receive, Scope, Send

from kgserve.admission.limits import Admission, Ticket
from kgserve.engine.client import EngineClient
from kgserve.engine.errors import SHUTDOWN_TEXT, failure_text
from kgserve.engine.stream import Listener, QueryStream
from kgserve.http.httpguard import abort_connection, on_disconnect, writes_holder
from kgserve.http.outbox import Outbox
from kgserve.katago.protocol import Query, dump_compact, error_line, line_kind, locate_id

__all__ = ["SHUTDOWN_TEXT", "EventChannel", "Exchange", "Plan", "is_analysis_line"]

T = TypeVar("T")


class EventChannel(Generic[T]):
    """A one-reader event channel: put_nowait from callbacks, get. The contract of the two `asyncio.Queue` methods
    it replaces (unbounded, FIFO, `put_nowait` never blocks, `get` waits for an item), without what a queue keeps
    for many readers and bounded sizes: one per request, so its set-up and each wait cost a deque and at most
    one future."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: T) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> T:
        """The oldest item, waiting for one. One reader at a time; a cancelled get leaves the items as they are."""
        while not self._items:
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        return self._items.popleft()


Event = tuple[str, int, Any]  # (kind, query index or -1, payload)


def is_analysis_line(line: bytes) -> bool:
    span = locate_id(line)
    return span is not None and line_kind(line, span[1]) in ("final", "partial")


class Plan(Protocol):
    """What one request runs, decided by the intake (kgserve.http.analysis.AnalysisResponse is one: no object of
    its own per request)."""

    pool: EngineClient
    admission: Admission
    ticket: Ticket  # what the request holds: its in-flight slots, its bytes of the budget, its client
    queries: list[Query]
    rejections: list[bytes]
    deadline_s: float
    raw_headers: list[tuple[bytes, bytes]]
    terminate_grace_s: float
    buffer_limit: int
    send_timeout_s: float


class _SlowClient(Exception):
    """The client has left more than the response buffer bound untaken."""


def _listener(index: int, events: EventChannel[Event]) -> Listener:
    """The callback a QueryStream hands its lines to (QueryStream.listen): no task per query."""

    def listener(item: bytes | BaseException | None) -> None:
        if item is None:
            events.put_nowait(("done", index, None))
        elif isinstance(item, BaseException):
            events.put_nowait(("died", index, failure_text(item)))
        else:
            events.put_nowait(("line", index, item.rstrip(b"\r\n") if item.endswith(b"\r") else item))

    return listener


async def _pump(index: int, stream: AsyncIterable[bytes], events: EventChannel[Event]) -> None:
    """For a stream without listen() (a stand-in engine client): a task reads it."""
    try:
        async for line in stream:
            events.put_nowait(("line", index, bytes(line).rstrip(b"\r\n")))
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        events.put_nowait(("died", index, failure_text(exc)))
        return
    events.put_nowait(("done", index, None))


async def _watch_disconnect(receive: Receive, events: EventChannel[Event]) -> None:
    """For a server without kgserve's connection extension: a task waits for http.disconnect."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            events.put_nowait(("disconnect", -1, None))
            return


class _QueryRun:
    """The request's queries on the engine client: all submitted at once, each one's lines and its end put on the
    request's event channel (by a callback on the engine pool's streams, by a task on a stand-in client's), and
    aborted when cut or when the request ends before them. Exchange runs the request on top of it."""

    __slots__ = ("_tasks", "events", "pending", "plan", "streams", "unavailable")

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        events: EventChannel[Event] = EventChannel()  # not EventChannel[Event](): typing's call costs µs
        self.events = events
        self.streams: dict[int, Any] = {}
        self.pending: set[int] = set(range(len(plan.queries)))
        self.unavailable = False  # no engine could take a query (starting, restarting)
        self._tasks: list[asyncio.Task[None]] = []

    def _submit_all(self) -> None:
        client = self.plan.ticket.client
        gate = client.take_partial if client.partial_rate else None  # the client's cap on partial-line bytes
        for index, query in enumerate(self.plan.queries):
            try:
                stream = self.streams[index] = self.plan.pool.submit(query, client.key)
            except Exception as exc:
                self.streams[index] = None
                self.unavailable = True
                reason = str(exc).split("; ", 1)[0]  # the pool's reason without the engine's own words (stderr)
                message = f"engine unavailable: kgserve could not submit this query ({reason})"
                self.events.put_nowait(("died", index, message))
                continue
            if isinstance(stream, QueryStream):  # the engine pool's: it takes a callback (no task per query)
                stream.partial_gate = gate
                stream.listen(_listener(index, self.events))
            else:
                self._tasks.append(asyncio.create_task(_pump(index, stream, self.events)))

    def _stuck(self) -> None:
        message = f"kgserve: the engine did not answer terminate within {self.plan.terminate_grace_s:g}s"
        for index in sorted(self.pending):
            self.events.put_nowait(("died", index, message))

    def _abort(self, index: int) -> None:
        stream = self.streams.get(index)
        if stream is not None:
            with contextlib.suppress(Exception):  # an engine that is gone has nothing left to abort
                self.plan.pool.abort(stream)


class Exchange(_QueryRun):
    """One request's run: the loop over its events and the reply (the status held until the first analysis line,
    the body through the outbox, the end on every way out); `run()` leaves its outcome in `state["outcome"]` (the
    access log's)."""

    # fmt: off
    __slots__ = (
        "_gone", "_released", "_timers", "analysis", "buffered", "cancelled", "cut_notes", "deadline_hit", "died",
        "extra_headers", "gone", "outbox", "receive", "scope", "slow", "state", "status",
    )
    # fmt: on

    def __init__(self, plan: Plan, state: dict[str, Any], scope: Scope, receive: Receive, send: Send) -> None:
        super().__init__(plan)
        self.state = state
        self.scope = scope
        self.receive = receive
        # HTTP/1.0 has no chunked encoding: such a client gets the whole response at the end, with a length
        client = plan.ticket.client
        budget = plan.admission.budget
        self.outbox = Outbox(
            send,
            plan.buffer_limit,
            whole=scope.get("http_version") == "1.0",
            hold=writes_holder(scope),
            charge=(lambda size: budget.take(client, size), lambda size: budget.give(client, size)),
        )
        events = self.events
        # closures over the channel, never over self: a request's objects must go by reference counting
        self.outbox.on_failed = lambda: events.put_nowait(("sent", -1, None))
        self._gone = lambda: events.put_nowait(("disconnect", -1, None))  # the client left
        self.buffered: list[bytes] = list(plan.rejections)
        self.status: int | None = None
        self.extra_headers: list[tuple[bytes, bytes]] = []
        self.analysis = self.died = self.deadline_hit = self.gone = self.slow = False
        self.cancelled = False
        self.cut_notes: list[int] = []  # queries cut after the status line went out: they get a warning line
        self._released = False
        self._timers: list[asyncio.TimerHandle] = []

    # -- sending: never awaited (kgserve.http.outbox) ------------------------------------------------------
    def _start(self, status: int) -> None:
        self.status = status
        self.outbox.put_start(status, [*self.plan.raw_headers, *self.extra_headers])

    def _body(self, chunk: bytes, more: bool = True) -> None:
        if not self.outbox.put_body(chunk, more=more):
            raise _SlowClient

    def _flush(self, status: int) -> None:
        if status == 503:
            self.extra_headers.append((b"retry-after", b"1"))
        self._start(status)
        if self.buffered:
            self._body(b"".join(line + b"\n" for line in self.buffered))
            self.buffered.clear()

    def _release(self) -> None:
        """The request's in-flight slots go back once its queries are over, not when its last byte is out."""
        if not self._released:
            self._released = True
            self.plan.admission.release(self.plan.ticket)

    # -- the run -------------------------------------------------------------------------------------------
    async def run(self) -> None:
        watcher: asyncio.Task[None] | None = None
        if not on_disconnect(self.scope, self._gone):
            watcher = asyncio.create_task(_watch_disconnect(self.receive, self.events))
        try:
            self._submit_all()
            loop = asyncio.get_running_loop()
            self._timers.append(loop.call_later(self.plan.deadline_s, self.events.put_nowait, ("deadline", -1, None)))
            events = self.events
            pending = self.pending
            while pending:  # one frame fewer between the event loop and each event than a coroutine of its own
                kind, index, payload = await events.get()
                if kind == "line":
                    if self.status is not None:
                        self._body(payload + b"\n")
                    else:
                        self.buffered.append(payload)
                        if is_analysis_line(payload):
                            self.analysis = True
                            self._flush(200)
                elif kind == "done":
                    pending.discard(index)
                elif kind == "died" and index in pending:
                    self._query_died(index, payload)
                elif kind == "deadline":
                    self._deadline()
                elif kind == "stuck":
                    self._stuck()
                elif kind in ("disconnect", "sent"):  # "sent": a send failed
                    self.gone = True
                    break
            self._release()
            if not self.gone:
                await self._finish()
        except _SlowClient:
            self.slow = self.gone = True
        except asyncio.CancelledError:
            await self._cancelled_reply()
        finally:
            for timer in self._timers:
                timer.cancel()
            on_disconnect(self.scope, self._gone, forget=True)
            if watcher is not None:
                watcher.cancel()
            self._settle()
            self.state["outcome"] = self._outcome()

    def _query_died(self, index: int, text: str) -> None:
        self.pending.discard(index)
        self.died = True
        line = error_line(text, caller_id=self.plan.queries[index].caller_id)
        if self.status is None:
            self.buffered.append(line)
            self._flush(503)
        else:
            self._body(line + b"\n")

    def _deadline(self) -> None:
        """Terminate every unfinished query; those cut after the status line went out get a warning line."""
        self.deadline_hit = True
        cut = sorted(self.pending)
        if self.status is None:
            self.extra_headers.append((b"x-deadline-exceeded", b"true"))
            self.cut_notes = []
        else:
            self.cut_notes = cut
        for index in cut:
            self._abort(index)
        stuck = ("stuck", -1, None)
        self._timers.append(
            asyncio.get_running_loop().call_later(self.plan.terminate_grace_s, self.events.put_nowait, stuck)
        )

    async def _finish(self) -> None:
        if self.status is None:
            self._flush(200 if self.analysis else 503 if self.died else 400)
        elif self.cut_notes:
            millis = round(self.plan.deadline_s * 1000)
            for index in self.cut_notes:
                note = {
                    "id": self.plan.queries[index].caller_id,
                    "warning": f"kgserve: request deadline of {millis} ms exceeded; this query was terminated",
                }
                self._body(dump_compact(note).encode("utf-8") + b"\n")
        self._body(b"", more=False)
        self.gone = self.slow = not await self.outbox.wait_sent(self.plan.send_timeout_s)

    async def _cancelled_reply(self) -> None:
        """uvicorn cancels what outlives the shutdown grace period; it would answer a 500 for a response not yet
        started, so end the response here (503 + a line per unfinished query) and let the task finish: the
        cancellation has done its job."""
        self.cancelled = True
        lines = [
            error_line(SHUTDOWN_TEXT, caller_id=self.plan.queries[index].caller_id) for index in sorted(self.pending)
        ]
        with contextlib.suppress(_SlowClient):
            if self.status is None:
                self.buffered.extend(lines)
                self._flush(503)
            else:
                self._body(b"".join(line + b"\n" for line in lines))
        with contextlib.suppress(_SlowClient):
            self._body(b"", more=False)
        # the event loop is going away: no waiting for the client here. A client that reads takes the reply at
        # once (the sender writes it within a few loop turns); one that does not is reset.
        with contextlib.suppress(asyncio.CancelledError):
            for _ in range(3):
                await asyncio.sleep(0)
        self.slow = not self.outbox.finished

    def _settle(self) -> None:
        """On every way out: unfinished queries terminated, slots back, a client that does not read dropped."""
        for index in sorted(self.pending):
            self._abort(index)
        for task in self._tasks:
            task.cancel()
        self._release()
        if self.slow:  # drop the client now: a close would wait for it to read what is buffered
            abort_connection(self.scope)
        if self.slow or self.cancelled or not self.outbox.finished:
            self.outbox.cancel()
        self.outbox.discharge()  # the answer bytes it held of the budget
        self.plan.admission.clients.let_go(self.plan.ticket.client)

    def _outcome(self) -> str:
        if self.cancelled:
            return "cancelled"
        if self.slow:
            return "slow_client"
        if self.gone:
            return "disconnect"
        if self.died:
            return "unavailable" if self.unavailable else "engine_died"
        if self.deadline_hit:
            return "deadline"
        return "ok" if self.analysis else "rejected"
