"""The part of one streamed response its client has not taken yet: bounded, and never awaited by the exchange.

The request's event loop (kgserve.http.analysis) never awaits a send, so a client that stops reading cannot
hold back its deadline, its disconnect or its terminates: the loop puts ASGI messages here and goes on.
What was put during one event-loop turn goes out at the end of that turn as one message (so a response
complete within a turn, the common case, is sent whole with a Content-Length, like a plain response, and
its head and body in one socket write where the server allows: kgserve.http.heldwrites).
A send is driven right there when the transport takes it at once (kgserve.http.sendcall); only a send that has
to wait for the client gets a task, which then sends whatever queued up meanwhile. For an HTTP/1.0 client
(which cannot read a chunked body) the whole response is held and sent with a Content-Length.
`put_body` returns False once the bytes waiting (queued plus a send in progress) pass `limit`, or past the
first ANSWER_FREE_BYTES would pass the memory budget (`charge`: kgserve.admission.budget): the caller then drops
the client instead of buffering more.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from starlette.types import Message, Send

from kgserve.admission.budget import ANSWER_FREE_BYTES
from kgserve.http.heldwrites import HeldWrites
from kgserve.http.sendcall import SendCall

__all__ = ["Outbox"]


class Outbox:
    def __init__(
        self,
        send: Send,
        limit: int,
        *,
        whole: bool = False,
        hold: Callable[[], HeldWrites | None] | None = None,
        charge: tuple[Callable[[int], bool], Callable[[int], None]] | None = None,
    ) -> None:
        self._send = send
        # the memory budget's take(size) -> fits and give(size), for waiting bytes past ANSWER_FREE_BYTES
        self._charge = charge
        self._charged = 0
        self._hold = hold  # joins the head's write with the body's (kgserve.http.heldwrites); None: no such thing
        self.limit = limit
        self.whole = whole  # hold everything, then send it with a Content-Length (HTTP/1.0: no chunked)
        self.sent_messages = 0  # progress, for a caller that watches for a stalled client
        self.finished = False  # the last message is out
        self.failed: BaseException | None = None  # a send raised: nothing more goes out
        self.on_failed: Callable[[], None] | None = None  # called once if a send raises
        self._start: Message | None = None
        self._started = False
        # one growing buffer, not a queue of small chunks: freed in one piece, it leaves no heap fragments
        self._buffer = bytearray()
        self._in_flight = 0  # bytes handed to a send that has not completed
        self._end = False
        self._last_out = False  # the last message was handed to send
        self._flush_soon: asyncio.Handle | None = None
        self._waiting: SendCall | None = None  # a send that waits for the client
        self._progress: asyncio.Event | None = None  # made when wait_sent has to wait (a slow client)

    @property
    def waiting_bytes(self) -> int:
        return len(self._buffer) + self._in_flight

    def put_start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self._start = {"type": "http.response.start", "status": status, "headers": headers}
        self._schedule()

    def put_body(self, chunk: bytes, *, more: bool = True) -> bool:
        """Queue a body chunk; False when the client is now over the limit or the memory budget (the chunk is
        queued all the same)."""
        self._buffer += chunk
        self._end = self._end or not more
        self._schedule()
        waiting = self.waiting_bytes
        if waiting > ANSWER_FREE_BYTES and self._charge is not None:
            more_held = waiting - ANSWER_FREE_BYTES - self._charged
            if more_held > 0:
                if not self._charge[0](more_held):
                    return False
                self._charged += more_held
        return waiting <= self.limit

    def discharge(self, keep: int = 0) -> None:
        """Give back the budget held for waiting bytes, down to `keep` bytes (0: all of it, the response is over)."""
        if self._charged > keep and self._charge is not None:
            self._charge[1](self._charged - keep)
            self._charged = keep

    def _schedule(self) -> None:
        if self._flush_soon is None and self._waiting is None:
            self._flush_soon = asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Send what is queued, as long as each send completes at once."""
        self._flush_soon = None
        # the head goes out with what body there is: one write on the socket, not two
        held = self._hold() if self._hold is not None and not self._started else None
        try:
            while self._waiting is None and not self._last_out and self.failed is None:
                message = self._next_message()
                if message is None:
                    return
                call = SendCall(self._send(message), self._sent)  # type: ignore[arg-type]  # ASGI send: a coroutine
                if not call.step():
                    self._waiting = call  # it finishes in a task of its own, then calls _sent
                    return
        finally:
            if held is not None:
                held.release()

    def _next_message(self) -> Message | None:
        if not self._started:
            if self._start is None or (self.whole and not self._end):
                return None
            self._started = True
            start = self._start
            if self._end:  # complete already: one body with its length (no chunked framing)
                length = (b"content-length", str(len(self._buffer)).encode("ascii"))
                start = {**start, "headers": [*start["headers"], length]}
            return start
        if not self._buffer and not self._end:
            return None
        data = bytes(self._buffer)
        self._buffer.clear()
        self._in_flight = len(data)
        message: Message = {"type": "http.response.body", "body": data, "more_body": not self._end}
        self._last_out = self._end
        return message

    def _sent(self, error: BaseException | None) -> None:
        self._in_flight = 0
        self.sent_messages += 1
        if self._charged:
            self.discharge(max(0, len(self._buffer) - ANSWER_FREE_BYTES))
        if self._progress is not None:
            self._progress.set()
        resumed = self._waiting is not None
        self._waiting = None
        if error is not None:
            self.failed = error
            if self.on_failed is not None:
                self.on_failed()
            return
        if self._last_out and not self._buffer:
            self.finished = True
            return
        if resumed:
            self._flush()

    async def wait_sent(self, stall_s: float) -> bool:
        """Wait until the last message is out; False if the client took nothing for `stall_s` (or a send failed)."""
        if self._flush_soon is not None:  # nothing more to gather: send now (usually done without waiting)
            self._flush_soon.cancel()
            self._flush()
        while self._waiting is not None or self._flush_soon is not None:
            before = self.sent_messages
            progress = self._progress = self._progress or asyncio.Event()
            progress.clear()
            try:
                await asyncio.wait_for(progress.wait(), stall_s)
            except TimeoutError:
                if self.sent_messages == before:
                    return False
        return self.finished and self.failed is None

    def cancel(self) -> None:
        """Give up: no further send, and a send waiting for the client is abandoned."""
        if self._flush_soon is not None:
            self._flush_soon.cancel()
            self._flush_soon = None
        if self._waiting is not None:
            self._waiting.cancel()
            self._waiting = None
