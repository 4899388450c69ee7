"""A one-reader event channel for a request's exchange (kgserve.http.analysis): put_nowait from callbacks, get.

The same contract as the two `asyncio.Queue` methods it replaces (unbounded, FIFO, `put_nowait` never
blocks, `get` waits for an item), without what a queue keeps for many readers and bounded sizes: one per
request, so its set-up and each wait cost a deque and at most one future.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

__all__ = ["EventChannel"]

T = TypeVar("T")


class EventChannel(Generic[T]):
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
