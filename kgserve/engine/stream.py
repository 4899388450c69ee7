"""A query's response lines as an async iterator (the engine errors are in kgserve.engine.errors).

`QueryStream` is what `Engine.submit` / `EnginePool.submit` return: iterate it for the engine's lines
(bytes, no newline, the caller's id restored); it ends after the query's last line and raises
`EngineDied` (or `AbortTimeout`) if the engine could not finish it. Or, instead of iterating, hand it a
callback with `listen()` (kgserve's HTTP path: no task and no queue per query). The engine feeds it through
`_push` and `_settle`; nothing here touches a process.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from kgserve.katago.protocol import Query, analysed_turns

if TYPE_CHECKING:
    from kgserve.engine.turns import Piece, TurnPlan

__all__ = ["Listener", "QueryStream", "StreamOwner"]

# listen() callback: a line (bytes), then None when the query is finished, or the error that ended it
Listener = Callable[[bytes | BaseException | None], None]


class StreamOwner(Protocol):
    """What an abort goes back to (kgserve.engine.dispatch.Dispatch: the query's turns may be on several engines)."""

    def abort(self, stream: QueryStream, turns: frozenset[int] | None = None) -> None: ...


_END = object()


class QueryStream:
    """Async iterator over one query's response lines (bytes, no newline, caller id restored)."""

    def __init__(self, owner: StreamOwner, query: Query, visits_per_turn: int, client: str | None = None) -> None:
        self.owner = owner
        self.engine: Any = None  # the engine its latest piece went to (None while all of it waits in kgserve)
        self.router: Any = None  # that engine's router (kgserve.engine.router)
        self.internal_id = ""  # that piece's id on the engine
        self.query = query
        self.visits_per_turn = visits_per_turn
        self.finals_left = max(1, query.expected_finals)
        self.caller_id_json = query.caller_id_json
        self.client = client  # the per-client caps' key (kgserve.engine.dispatch; None: never held back)
        self.aborted = False
        self.started = False  # a line has come (a query with none yet may move to another engine)
        # asked before each partial (isDuringSearch) line with its size: False and the line is not passed on (a
        # front end's per-client cap on partial-line bytes); None: every line is
        self.partial_gate: Callable[[int], bool] | None = None
        self.done = False
        self.error: BaseException | None = None
        self.submitted_at = time.monotonic()
        # kgserve.engine.dispatch: its turns not yet written (None: written whole at once), its arrival, the
        # pieces written and not finished, the piece whose warning lines are passed on (KataGo warns once a query)
        self.plan: TurnPlan | None = None
        self.seq = 0
        self.pieces: list[Piece] = []
        self.warned_by: Piece | None = None
        self._items: asyncio.Queue[Any] | None = None  # made on first use: a listener needs none
        self._listener: Listener | None = None
        self._abort_timer: asyncio.TimerHandle | None = None
        self._open_turns: set[int] | None = None  # turns not yet sent a terminate (made on the first one)

    @property
    def held(self) -> bool:
        """Nothing of it written yet: it waits in kgserve for a thread (to its client, a query queued in KataGo)."""
        return not self.pieces and self.plan is not None and self.plan.left > 0 and not self.done

    def claim_turns(self, turns: frozenset[int]) -> list[int]:
        """The turns of `turns` this query analyses and was not yet sent a terminate for, now marked as sent:
        a turn's terminate goes to the engine at most once, however often or widely a client asks."""
        if self._open_turns is None:
            self._open_turns = set(analysed_turns(self.query.body))
        claimed = sorted(self._open_turns.intersection(turns))
        self._open_turns.difference_update(claimed)
        return claimed

    @property
    def caller_id(self) -> str:
        return self.query.caller_id

    def __aiter__(self) -> QueryStream:
        return self

    def _queue(self) -> asyncio.Queue[Any]:
        if self._items is None:
            self._items = asyncio.Queue()
        return self._items

    async def __anext__(self) -> bytes:
        items = self._queue()
        item = await items.get()
        if item is _END:
            items.put_nowait(_END)  # iterating again ends again
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            items.put_nowait(item)
            raise item
        line: bytes = item
        return line

    async def collect(self) -> list[bytes]:
        """All remaining lines (raises like iteration does)."""
        return [line async for line in self]

    def listen(self, listener: Listener) -> None:
        """Take the lines by callback from now on (what was already queued first); do not iterate as well."""
        queued = self._items
        self._items = None
        while queued is not None and not queued.empty():
            item = queued.get_nowait()
            listener(None if item is _END else item)
        self._listener = listener

    def _push(self, line: bytes) -> None:
        self.started = True
        if self._listener is not None:
            self._listener(line)
        else:
            self._queue().put_nowait(line)

    def _settle(self, error: BaseException | None) -> None:
        if self.done:
            return
        self.done = True
        self.error = error
        if self._abort_timer is not None:
            self._abort_timer.cancel()
            self._abort_timer = None
        if self._listener is not None:
            self._listener(error)
        else:
            self._queue().put_nowait(error if error is not None else _END)
