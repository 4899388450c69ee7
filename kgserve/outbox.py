"""The part of one streamed response its client has not taken yet: bounded, and sent by a task of its own.

The request's event loop (kgserve.analysis) never awaits a send, so a client that stops reading cannot
hold back its deadline, its disconnect or its terminates: the loop puts ASGI messages here and goes on.
`run()` (a task) sends them in order, joining body chunks that queued up meanwhile. For an HTTP/1.0
client (which cannot read a chunked body) it holds the whole response and sends it with a Content-Length.
`put_body` returns False once the bytes waiting (queued plus the write in progress) pass `limit`: the
caller then drops the client instead of buffering more.
"""

from __future__ import annotations

import asyncio

from starlette.types import Message, Send

__all__ = ["Outbox"]


class Outbox:
    def __init__(self, send: Send, limit: int, *, whole: bool = False) -> None:
        self._send = send
        self.limit = limit
        self.whole = whole  # hold everything, then send it with a Content-Length (HTTP/1.0: no chunked)
        self.sent_messages = 0  # progress, for a caller that watches for a stalled client
        self.finished = False  # the last message is out
        self._start: Message | None = None
        # one growing buffer, not a queue of small chunks: freed in one piece, it leaves no heap fragments
        self._buffer = bytearray()
        self._in_flight = 0  # bytes handed to send() and not yet taken by the transport
        self._end = False
        self._ready = asyncio.Event()

    @property
    def waiting_bytes(self) -> int:
        return len(self._buffer) + self._in_flight

    def put_start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self._start = {"type": "http.response.start", "status": status, "headers": headers}
        self._ready.set()

    def put_body(self, chunk: bytes, *, more: bool = True) -> bool:
        """Queue a body chunk; False when the client is now over the limit (the chunk is queued all the same)."""
        self._buffer += chunk
        self._end = self._end or not more
        self._ready.set()
        return self.waiting_bytes <= self.limit

    async def run(self) -> None:
        """Send the status line, then the body as it comes, until the last body message is out."""
        while self._start is None or (self.whole and not self._end):
            self._ready.clear()
            await self._ready.wait()
        if self.whole:
            length = (b"content-length", str(len(self._buffer)).encode("ascii"))
            self._start = {**self._start, "headers": [*self._start["headers"], length]}
        await self._send(self._start)
        self.sent_messages += 1
        while True:
            while not self._buffer and not self._end:
                self._ready.clear()
                await self._ready.wait()
            data = bytes(self._buffer)
            self._buffer.clear()
            last = self._end
            self._in_flight = len(data)
            await self._send({"type": "http.response.body", "body": data, "more_body": not last})
            self._in_flight = 0
            self.sent_messages += 1
            if last:
                self.finished = True
                return
