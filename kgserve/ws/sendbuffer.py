"""The send side of one WebSocket connection: lines wait in a queue for the socket, bounded in bytes.

`put` never waits: a line that would take the bytes waiting past `limit` (websocket.send_buffer_bytes), or past
the first ANSWER_FREE_BYTES beyond what the memory budget lets its client hold (`charge`:
kgserve.admission.budget), is not queued and sets `overflow` (one line always fits the limit, however long),
which ends the connection (kgserve.ws.wsconnection: the client is not reading its answers). `closed`: nothing
more is queued; `release()` gives the budget back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from starlette.websockets import WebSocket

from kgserve.admission.budget import ANSWER_FREE_BYTES

__all__ = ["SendBuffer"]


class SendBuffer:
    def __init__(
        self,
        websocket: WebSocket,
        limit: int,
        charge: tuple[Callable[[int], bool], Callable[[int], None]] | None = None,
    ) -> None:
        self.websocket = websocket
        self.limit = limit
        self.overflow = asyncio.Event()
        self.closed = False
        self._queue: asyncio.Queue[bytes] = asyncio.Queue()
        self._buffered = 0
        self._charge = charge  # the budget's take(size) -> fits, give(size)
        self._charged = 0

    @property
    def empty(self) -> bool:
        return not self._buffered

    def put(self, line: bytes) -> None:
        if self.closed:
            return
        if self._buffered and self._buffered + len(line) > self.limit:
            self.overflow.set()
            return
        if not self._hold(self._buffered + len(line)):
            self.overflow.set()
            return
        self._buffered += len(line)
        self._queue.put_nowait(line)

    def _hold(self, waiting: int) -> bool:
        """Hold budget for `waiting` bytes past the free share; False when the budget does not let it."""
        more = waiting - ANSWER_FREE_BYTES - self._charged
        if more <= 0 or self._charge is None:
            return True
        if not self._charge[0](more):
            return False
        self._charged += more
        return True

    def release(self, keep: int = 0) -> None:
        """Give back the budget held past `keep` bytes (0: all of it, the connection is over)."""
        if self._charged > keep and self._charge is not None:
            self._charge[1](self._charged - keep)
            self._charged = keep

    async def send_loop(self) -> None:
        """Send the queued lines, one text message each, until cancelled; the event loop gets a turn between two
        (a send does not wait while the socket takes it: thousands queued would go out in one turn)."""
        while True:
            item = await self._queue.get()
            await self.websocket.send_text(item.decode("utf-8", errors="replace"))
            self._buffered -= len(item)
            if self._charged:
                self.release(max(0, self._buffered - ANSWER_FREE_BYTES))
            if not self._queue.empty():
                await asyncio.sleep(0)
