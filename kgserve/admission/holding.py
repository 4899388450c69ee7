"""Requests held past their client's per-client bound instead of refused (issue 40: over a bound, prefer holding to
refusing).

An HTTP request whose client is past `limits.max_inflight_per_client` while another client has queries in flight
(kgserve.admission.limits: the bound engages only among clients that contend) waits here, at most
`limits.hold_past_share_s` (and its own deadline), for room: it is woken when one of its client's queries is over
(one waiter a query, oldest first), or when its client is alone again (all of them); then it tries admission again.
Its connection reads nothing more meanwhile (uvicorn reads one request of a connection at a time), so a batch client
with more connections than its share has its surplus waiting in kgserve as sockets, not as 429s and retries. Only a
request still past the bound when its wait ends gets the 429.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

__all__ = ["HeldRequests"]


class HeldRequests:
    """The requests waiting for room, per client key, oldest first."""

    def __init__(self) -> None:
        self.waiting: dict[str, deque[asyncio.Future[None]]] = {}

    def __len__(self) -> int:
        return sum(len(queue) for queue in self.waiting.values())

    async def wait(self, key: str, timeout_s: float) -> bool:
        """Wait until woken (True) or `timeout_s` has passed (False)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self.waiting.setdefault(key, deque())
        queue.append(future)
        try:
            async with asyncio.timeout(timeout_s):
                await future
            return True
        except TimeoutError:
            return False
        finally:
            if not future.done():
                future.cancel()
            if future in queue:
                queue.remove(future)
            if not queue and self.waiting.get(key) is queue:
                del self.waiting[key]

    def wake(self, key: str, count: int) -> None:
        """Wake up to `count` of `key`'s waiters, oldest first (its queries over: room for that many)."""
        queue = self.waiting.get(key)
        while queue and count > 0:
            future = queue.popleft()
            if not future.done():
                future.set_result(None)
                count -= 1
        if queue is not None and not queue:
            self.waiting.pop(key, None)

    def wake_alone(self, alone: Callable[[str], bool]) -> None:
        """Wake every waiter of the clients that `alone` says no longer contend (no one else has work in flight)."""
        for key in [key for key in self.waiting if alone(key)]:
            self.wake(key, len(self.waiting[key]))
