"""The part of one streamed response its client has not taken yet: bounded, and sent by a task of its own.

The request's event loop (kgserve.analysis) never awaits a send, so a client that stops reading cannot
hold back its deadline, its disconnect or its terminates: the loop puts ASGI messages here and goes on.
`run()` (a task) sends them in order, joining body chunks that queued up meanwhile. `put_body` returns
False once the bytes waiting (queued plus the write in progress) pass `limit`: the caller then drops the
client instead of buffering more.
"""

from __future__ import annotations

import asyncio
from collections import deque

from starlette.types import Message, Send

__all__ = ["Outbox"]


class Outbox:
    def __init__(self, send: Send, limit: int) -> None:
        self._send = send
        self.limit = limit
        self.waiting_bytes = 0
        self.sent_messages = 0  # progress, for a caller that watches for a stalled client
        self.finished = False  # the last message is out
        self._queue: deque[Message] = deque()
        self._ready = asyncio.Event()

    def put_start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self._put({"type": "http.response.start", "status": status, "headers": headers})

    def put_body(self, chunk: bytes, *, more: bool = True) -> bool:
        """Queue a body chunk; False when the client is now over the limit (the chunk is queued all the same)."""
        self.waiting_bytes += len(chunk)
        self._put({"type": "http.response.body", "body": chunk, "more_body": more})
        return self.waiting_bytes <= self.limit

    def _put(self, message: Message) -> None:
        self._queue.append(message)
        self._ready.set()

    def _next(self) -> Message:
        message = self._queue.popleft()
        if message["type"] != "http.response.body" or not message["more_body"]:
            return message
        chunks = [message["body"]]
        more = True
        while more and self._queue and self._queue[0]["type"] == "http.response.body":
            following = self._queue.popleft()
            chunks.append(following["body"])
            more = following["more_body"]
        return {"type": "http.response.body", "body": b"".join(chunks), "more_body": more}

    async def run(self) -> None:
        """Send everything put here, in order, until the last body message is out."""
        while True:
            while not self._queue:
                self._ready.clear()
                await self._ready.wait()
            message = self._next()
            await self._send(message)
            self.sent_messages += 1
            self.waiting_bytes -= len(message.get("body", b""))
            if message["type"] == "http.response.body" and not message["more_body"]:
                self.finished = True
                return
