"""A query's response lines as an async iterator (the engine errors are in kgserve.engine_errors).

`QueryStream` is what `Engine.submit` / `EnginePool.submit` return: iterate it for the engine's lines
(bytes, no newline, the caller's id restored); it ends after the query's last line and raises
`EngineDied` (or `AbortTimeout`) if the engine could not finish it. The engine feeds it through
`_push` and `_settle`; nothing here touches a process.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol

from kgserve.protocol import Query

__all__ = ["QueryStream", "StreamOwner"]


class StreamOwner(Protocol):
    """The engine a stream was submitted to (kgserve.engine.Engine): an abort goes back to it."""

    def abort(self, stream: QueryStream, turns: list[int] | None = None) -> None: ...


_END = object()


class QueryStream:
    """Async iterator over one query's response lines (bytes, no newline, caller id restored)."""

    def __init__(self, engine: StreamOwner, query: Query, internal_id: str, visits_per_turn: int) -> None:
        self.engine = engine
        self.query = query
        self.internal_id = internal_id
        self.visits_per_turn = visits_per_turn
        self.finals_left = max(1, query.expected_finals)
        self.caller_id_json = query.caller_id_json
        self.aborted = False
        self.done = False
        self.error: BaseException | None = None
        self.submitted_at = time.monotonic()
        self._items: asyncio.Queue[Any] = asyncio.Queue()
        self._abort_timer: asyncio.TimerHandle | None = None

    @property
    def caller_id(self) -> str:
        return self.query.caller_id

    @property
    def outstanding_visits(self) -> int:
        return 0 if self.done else self.visits_per_turn * self.finals_left

    def __aiter__(self) -> QueryStream:
        return self

    async def __anext__(self) -> bytes:
        item = await self._items.get()
        if item is _END:
            self._items.put_nowait(_END)  # iterating again ends again
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            self._items.put_nowait(item)
            raise item
        line: bytes = item
        return line

    async def collect(self) -> list[bytes]:
        """All remaining lines (raises like iteration does)."""
        return [line async for line in self]

    def _push(self, line: bytes) -> None:
        self._items.put_nowait(line)

    def _settle(self, error: BaseException | None) -> None:
        if self.done:
            return
        self.done = True
        self.error = error
        if self._abort_timer is not None:
            self._abort_timer.cancel()
            self._abort_timer = None
        self._items.put_nowait(error if error is not None else _END)
