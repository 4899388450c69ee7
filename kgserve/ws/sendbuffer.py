"""The send side of one WebSocket connection: lines wait in a queue for the socket, bounded in bytes.

`put` never waits: a line that would take the bytes waiting past `limit` is not queued and sets `overflow`
(one line always fits, however long), which ends the connection (kgserve.ws.wsconnection: the client is not
reading its answers). `closed`: nothing more is queued.
"""

from __future__ import annotations

import asyncio

from starlette.websockets import WebSocket

__all__ = ["SendBuffer"]


class SendBuffer:
    def __init__(self, websocket: WebSocket, limit: int) -> None:
        self.websocket = websocket
        self.limit = limit
        self.overflow = asyncio.Event()
        self.closed = False
        self._queue: asyncio.Queue[bytes] = asyncio.Queue()
        self._buffered = 0

    def put(self, line: bytes) -> None:
        if self.closed:
            return
        if self._buffered and self._buffered + len(line) > self.limit:
            self.overflow.set()
            return
        self._buffered += len(line)
        self._queue.put_nowait(line)

    async def send_loop(self) -> None:
        """Send the queued lines, one text message each, until cancelled."""
        while True:
            item = await self._queue.get()
            await self.websocket.send_text(item.decode("utf-8", errors="replace"))
            self._buffered -= len(item)
