"""POST /analysis: one request's queries, from the body to the last streamed line.

What the client sees (also in docs/http-api.md):

- The body is what one would pipe into `katago analysis`: one JSON query (compact or pretty-printed) or
  JSON lines. Lines KataGo would answer without an id (not JSON, not an object, no string id, an unknown
  action) get KataGo's exact error line from kgserve itself; the five known actions get kgserve's own
  error line (`kgserve accepts analysis queries only: ...`). None of them reaches the engine. Their lines
  come first, in body order; the engine's lines follow in the order the engine writes them, with the
  caller's ids, byte for byte as KataGo wrote them (partial `isDuringSearch` lines as they are produced).
- Status: the status line must be sent before the first body byte, so kgserve holds the response back
  until the engine's first analysis line (`isDuringSearch` true or false) for any query of the request,
  or until every query is finished. 200 when some analysis came; 400 when every query was rejected
  (by kgserve or by the engine, e.g. an illegal move), the body still holding the error lines.
- Engine died (or could not take the query): 503. If the status line was already sent (200), the
  response goes on and each query the engine never finished gets a line
  `{"error":"engine died before finishing this query (...)","id":"<caller id>"}`.
- Deadline (limits.deadline_s, or a shorter `X-Deadline-Ms`): kgserve sends `terminate` for every
  unfinished query and streams what KataGo answers (its partial final result, or `noResults`). Header
  `X-Deadline-Exceeded: true` when the status line was not yet sent; otherwise each cut query gets a
  line `{"id":"<caller id>","warning":"kgserve: request deadline of N ms exceeded; ..."}` at the end.
  If the engine does not answer a terminate within limits.terminate_grace_s, the query ends with an error
  line (so a request ends close to its deadline even when thousands of terminates are queued).
- Slow client: kgserve never waits on a send. It holds at most server.max_response_buffer_bytes of response
  for a client that does not read; past that, or when the client takes nothing for server.send_timeout_s,
  the request's queries are terminated and the connection is dropped (outcome `slow_client`). The
  in-flight slots go back when the queries are over, whatever the client does.
- Client disconnect, at any point: `terminate` for every unfinished query of the request, at once.
- Shutdown: a request still running when server.grace_period_s is over gets 503 (or, after a 200 status
  line, appended lines) `{"error":"kgserve is shutting down: this query was terminated","id":...}`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, Mapping, Sequence
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from kgserve.engine.client import EngineClient
from kgserve.engine.errors import failure_text
from kgserve.engine.stream import Listener
from kgserve.http.events import EventChannel
from kgserve.http.httpguard import abort_connection, on_disconnect, writes_holder
from kgserve.http.limits import Admission
from kgserve.http.outbox import Outbox
from kgserve.katago.protocol import Query, dump_compact, error_line, line_kind, locate_id

__all__ = [
    "NDJSON",
    "TERMINATE_GRACE_S",
    "AnalysisResponse",
    "is_analysis_line",
    "plain_ndjson",
    "refusal",
]

NDJSON = "application/x-ndjson"
TERMINATE_GRACE_S = 2.0  # the default of limits.terminate_grace_s


def is_analysis_line(line: bytes) -> bool:
    span = locate_id(line)
    return span is not None and line_kind(line, span[1]) in ("final", "partial")


class _SlowClient(Exception):
    """The client has left more than the response buffer bound untaken."""


class AnalysisResponse(Response):
    """An ASGI response that runs the request's queries on the pool while streaming their lines."""

    def __init__(
        self,
        *,
        pool: EngineClient,
        admission: Admission,
        queries: Sequence[Query],
        rejections: Sequence[bytes],
        deadline_s: float,
        state: dict[str, Any],
        headers: Mapping[str, str] | None = None,
        terminate_grace_s: float = TERMINATE_GRACE_S,
        buffer_limit: int = 1 << 20,
        send_timeout_s: float = 30.0,
    ) -> None:
        # no super().__init__: that would declare a Content-Length; this body is streamed (chunked)
        self.status_code = 200
        self.background = None
        self.raw_headers = [(b"content-type", NDJSON.encode()), (b"cache-control", b"no-store")] + [
            (key.lower().encode("latin-1"), value.encode("latin-1")) for key, value in (headers or {}).items()
        ]
        self.pool = pool
        self.admission = admission
        self.queries = list(queries)
        self.rejections = list(rejections)
        self.deadline_s = deadline_s
        self.request_state = state
        self.terminate_grace_s = terminate_grace_s
        self.buffer_limit = buffer_limit
        self.send_timeout_s = send_timeout_s
        self._outbox: Outbox | None = None
        self._status: int | None = None
        self._extra_headers: list[tuple[bytes, bytes]] = []
        self._unavailable = False  # no engine could take a query (starting, restarting)
        self._cancelled = False
        self._released = False

    # -- sending: never awaited by the exchange (kgserve.http.outbox) --------------------------------------------
    def _start(self, status: int) -> None:
        assert self._outbox is not None
        self._status = status
        self._outbox.put_start(status, [*self.raw_headers, *self._extra_headers])

    def _body(self, chunk: bytes, more: bool = True) -> None:
        assert self._outbox is not None
        if not self._outbox.put_body(chunk, more=more):
            raise _SlowClient

    def _release(self) -> None:
        """The request's in-flight slots go back once its queries are over, not when its last byte is out."""
        if not self._released:
            self._released = True
            self.admission.release(len(self.queries))

    # -- engine side -------------------------------------------------------------------------------------
    @staticmethod
    def _listener(index: int, events: EventChannel[tuple[str, int, Any]]) -> Listener:
        """The callback a QueryStream hands its lines to (kgserve.engine.stream.listen): no task per query."""

        def listener(item: bytes | BaseException | None) -> None:
            if item is None:
                events.put_nowait(("done", index, None))
            elif isinstance(item, BaseException):
                events.put_nowait(("died", index, failure_text(item)))
            else:
                events.put_nowait(("line", index, item.rstrip(b"\r\n") if item.endswith(b"\r") else item))

        return listener

    @staticmethod
    async def _pump(index: int, stream: AsyncIterable[bytes], events: EventChannel[tuple[str, int, Any]]) -> None:
        """For a stream without listen() (a stand-in pool): a task reads it."""
        try:
            async for line in stream:
                events.put_nowait(("line", index, bytes(line).rstrip(b"\r\n")))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            events.put_nowait(("died", index, failure_text(exc)))
            return
        events.put_nowait(("done", index, None))

    async def _abort(self, stream: Any) -> None:
        if stream is None:
            return
        with contextlib.suppress(Exception):  # an engine that is gone has nothing left to abort
            self.pool.abort(stream)

    @staticmethod
    async def _watch_disconnect(receive: Receive, events: EventChannel[tuple[str, int, Any]]) -> None:
        """For a server without kgserve's connection extension: a task waits for http.disconnect."""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                events.put_nowait(("disconnect", -1, None))
                return

    def _submit(self, index: int, query: Query, events: EventChannel[tuple[str, int, Any]]) -> Any:
        try:
            return self.pool.submit(query)
        except Exception as exc:
            self._unavailable = True
            reason = str(exc).split("; ", 1)[0]  # the pool's reason without the engine's own words (stderr)
            events.put_nowait(("died", index, f"engine unavailable: kgserve could not submit this query ({reason})"))
            return None

    # -- the exchange ------------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        loop = asyncio.get_running_loop()
        # HTTP/1.0 has no chunked encoding: such a client gets the whole response at the end, with a length
        outbox = self._outbox = Outbox(
            send, self.buffer_limit, whole=scope.get("http_version") == "1.0", hold=writes_holder(scope)
        )
        events: EventChannel[tuple[str, int, Any]] = EventChannel()
        outbox.on_failed = lambda: events.put_nowait(("sent", -1, None))
        streams: dict[int, Any] = {}
        pending: set[int] = set(range(len(self.queries)))
        tasks: list[asyncio.Task[None]] = []
        buffered: list[bytes] = list(self.rejections)
        analysis = died = deadline_hit = gone = slow = False
        cut: list[int] = []
        cut_notes: list[int] = []  # queries cut after the status line went out: they get a warning line
        timers: list[asyncio.TimerHandle] = []
        watcher: asyncio.Task[None] | None = None

        def disconnected() -> None:
            events.put_nowait(("disconnect", -1, None))

        if not on_disconnect(scope, disconnected):
            watcher = asyncio.create_task(self._watch_disconnect(receive, events))
        try:
            for index, query in enumerate(self.queries):
                stream = streams[index] = self._submit(index, query, events)
                if stream is None:
                    continue
                if hasattr(stream, "listen"):
                    stream.listen(self._listener(index, events))
                else:
                    tasks.append(asyncio.create_task(self._pump(index, stream, events)))
            timers.append(loop.call_later(self.deadline_s, events.put_nowait, ("deadline", -1, None)))
            while pending:
                kind, index, payload = await events.get()
                if kind == "line":
                    if self._status is not None:
                        self._body(payload + b"\n")
                        continue
                    buffered.append(payload)
                    if is_analysis_line(payload):
                        analysis = True
                        self._flush(200, buffered)
                elif kind == "done":
                    pending.discard(index)
                elif kind == "died" and index in pending:
                    pending.discard(index)
                    died = True
                    line = error_line(payload, caller_id=self.queries[index].caller_id)
                    if self._status is None:
                        buffered.append(line)
                        self._flush(503, buffered)
                    else:
                        self._body(line + b"\n")
                elif kind == "deadline":
                    deadline_hit = True
                    cut = sorted(pending)
                    if self._status is None:
                        self._extra_headers.append((b"x-deadline-exceeded", b"true"))
                        cut_notes = []
                    else:
                        cut_notes = cut
                    for pending_index in cut:
                        await self._abort(streams.get(pending_index))
                    timers.append(loop.call_later(self.terminate_grace_s, events.put_nowait, ("stuck", -1, None)))
                elif kind == "stuck":
                    for stuck_index in sorted(pending):
                        message = f"kgserve: the engine did not answer terminate within {self.terminate_grace_s:g}s"
                        events.put_nowait(("died", stuck_index, message))
                elif kind in ("disconnect", "sent"):  # "sent": a send failed
                    gone = True
                    break
            self._release()
            if not gone:
                if self._status is None:
                    self._flush(200 if analysis else 503 if died else 400, buffered)
                elif cut_notes:
                    self._deadline_notes(cut_notes)
                self._body(b"", more=False)
                gone = not await outbox.wait_sent(self.send_timeout_s)
                slow = gone
        except _SlowClient:
            slow = gone = True
        except asyncio.CancelledError:
            # uvicorn cancels what outlives the shutdown grace period; it would answer a 500 for a response
            # not yet started, so end the response here (503 + a line per unfinished query) and let the
            # task finish: the cancellation has done its job.
            self._cancelled = True
            self._shutdown_reply(sorted(pending), buffered)
            # the event loop is going away: no waiting for the client here. A client that reads takes the
            # reply at once (the sender writes it within a few loop turns); one that does not is reset.
            with contextlib.suppress(asyncio.CancelledError):
                for _ in range(3):
                    await asyncio.sleep(0)
            slow = not outbox.finished
        finally:
            for timer in timers:
                timer.cancel()
            on_disconnect(scope, disconnected, forget=True)
            if watcher is not None:
                watcher.cancel()
            for index in sorted(pending):
                await self._abort(streams.get(index))
            for task in tasks:
                task.cancel()
            self._release()
            if slow:  # drop the client now: a close would wait for it to read what is buffered
                abort_connection(scope)
            if slow or self._cancelled or not outbox.finished:
                outbox.cancel()
            self._record(gone=gone, slow=slow, died=died, deadline_hit=deadline_hit, analysis=analysis)

    def _flush(self, status: int, buffered: list[bytes]) -> None:
        if status == 503:
            self._extra_headers.append((b"retry-after", b"1"))
        self._start(status)
        if buffered:
            self._body(b"".join(line + b"\n" for line in buffered))
            buffered.clear()

    def _shutdown_reply(self, unfinished: list[int], buffered: list[bytes]) -> None:
        lines = [
            error_line("kgserve is shutting down: this query was terminated", caller_id=self.queries[index].caller_id)
            for index in unfinished
        ]
        with contextlib.suppress(_SlowClient):
            if self._status is None:
                self._flush(503, [*buffered, *lines])
            else:
                self._body(b"".join(line + b"\n" for line in lines))
        with contextlib.suppress(_SlowClient):
            self._body(b"", more=False)

    def _deadline_notes(self, cut: list[int]) -> None:
        millis = round(self.deadline_s * 1000)
        for index in cut:
            note = {
                "id": self.queries[index].caller_id,
                "warning": f"kgserve: request deadline of {millis} ms exceeded; this query was terminated",
            }
            self._body(dump_compact(note).encode("utf-8") + b"\n")

    def _record(self, *, gone: bool, slow: bool, died: bool, deadline_hit: bool, analysis: bool) -> None:
        if self._cancelled:
            outcome = "cancelled"
        elif slow:
            outcome = "slow_client"
        elif gone:
            outcome = "disconnect"
        elif died:
            outcome = "unavailable" if self._unavailable else "engine_died"
        elif deadline_hit:
            outcome = "deadline"
        else:
            outcome = "ok" if analysis else "rejected"
        self.request_state["outcome"] = outcome


def plain_ndjson(status: int, lines: Sequence[bytes], headers: Mapping[str, str] | None = None) -> Response:
    """A whole ndjson response known before any engine work (all rejected, or refused)."""
    return Response(b"".join(line + b"\n" for line in lines), status_code=status, media_type=NDJSON, headers=headers)


def refusal(status: int, message: str, headers: Mapping[str, str] | None = None) -> Response:
    """kgserve's own refusal of a whole request, as one ndjson error line."""
    return plain_ndjson(status, [error_line(message)], headers)
