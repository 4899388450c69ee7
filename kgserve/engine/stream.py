"""A query's response lines as an async iterator (the engine errors are in kgserve.engine.errors), the pieces of it
written to the engines, and the face of the engine line they go to.

`QueryStream` is what `Engine.submit` / `EnginePool.submit` return: iterate it for the engine's lines
(bytes, no newline, the caller's id restored); it ends after the query's last line and raises
`EngineDied` (or `AbortTimeout`) if the engine could not finish it. Or, instead of iterating, hand it a
callback with `listen()` (kgserve's HTTP path: no task and no queue per query). The engine feeds it through
`_push` and `_settle`; nothing here touches a process.

`Piece` is one request line written to an engine (some turns of a query, kgserve.engine.turns), and `EngineLine`
what the dispatch's other parts ask of the engine it went to (kgserve.engine.router.Router is one): they live here,
below the router, the settler and the dispatch, so that those depend on this contract and never on each other.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from kgserve.engine.reserve import EngineLoad
from kgserve.engine.turns import TurnPlan
from kgserve.katago.protocol import Query, analysed_turns, encode_query, engine_line

__all__ = ["EngineLine", "Listener", "Piece", "QueryStream", "StreamOwner"]

# listen() callback: a line (bytes), then None when the query is finished, or the error that ended it
Listener = Callable[[bytes | BaseException | None], None]


class StreamOwner(Protocol):
    """What an abort goes back to (kgserve.engine.dispatch.Dispatch: the query's turns may be on several engines)."""

    def abort(self, stream: QueryStream, turns: frozenset[int] | None = None) -> None: ...


class EngineLine(Protocol):
    """One engine's pieces in flight, as the dispatch (who holds turns) and the settler (who ends queries) see it:
    kgserve.engine.router.Router, which starts them. Its pieces are its own: they ask it to write, terminate, drop
    or give back a piece, never touch its tables; `load` is the dispatch's count kept per engine, and the settler
    counts each query's outcome in `counters`."""

    owner: Any  # the Engine (what a stream's `engine` says; its `suspect` flag orders the engines)
    label: str
    index: int
    load: EngineLoad  # turns in the engine (the dispatch counts them in and out)
    outstanding_visits: int
    counters: dict[str, int]

    @property
    def pending(self) -> int: ...

    def pieces(self) -> Iterable[Piece]: ...

    def write(self, stream: QueryStream, taken: list[int | None], count: int) -> Piece: ...

    def terminate(self, piece: Piece, turns: list[int] | None = None) -> None: ...

    def drop(self, piece: Piece) -> int: ...

    def orphan(self, piece: Piece) -> None: ...

    def unstarted(self) -> list[Piece]: ...


_END = object()


class QueryStream:
    """Async iterator over one query's response lines (bytes, no newline, caller id restored)."""

    def __init__(self, owner: StreamOwner, query: Query, visits_per_turn: int, client: str | None = None) -> None:
        self.owner = owner
        self.engine: Any = None  # the engine its latest piece went to (None while all of it waits in kgserve)
        self.router: EngineLine | None = None  # that engine's line (kgserve.engine.router)
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


class Piece:
    """One request line written to an engine: some turns of a stream's query (None: the whole query)."""

    __slots__ = (
        "at_once", "count", "finals_left", "internal_id", "orphan", "router", "started", "stream", "taken", "turns",
        "written_at",
    )  # fmt: skip

    def __init__(
        self, stream: QueryStream, taken: list[int | None], count: int, internal_id: str, router: EngineLine
    ) -> None:
        self.stream = stream
        self.taken = taken  # what it took of the stream's plan (given back if it never starts)
        plan = stream.plan
        split = plan is not None and plan.split
        self.turns: list[int] | None = sorted(turn for turn in taken if turn is not None) if split else None
        self.count = count  # threads it holds until its finals come (one per turn)
        self.finals_left = count
        self.internal_id = internal_id
        self.router = router  # the engine line it was written to (what a terminate of it goes through)
        self.started = False  # a line of it has come
        self.orphan = False  # its stream was settled: its lines are dropped until it ends
        self.written_at = time.monotonic()  # when its searches started, if `at_once`
        self.at_once = False  # every turn of it had a free thread when written (nothing queued before it in KataGo)

    def line(self) -> bytes:
        query = self.stream.query
        turns = self.turns
        if turns is None:
            return engine_line(query, self.internal_id)
        plan = self.stream.plan
        priorities = plan.priorities if plan is not None else None
        raw = query.raw
        if raw is None:
            body = dict(query.body)
            body["analyzeTurns"] = turns
            if priorities is not None:
                body["priorities"] = [priorities[turn] for turn in turns]
            return encode_query(body, self.internal_id)
        extra = b'"analyzeTurns":[%s]' % b",".join(b"%d" % turn for turn in turns)
        if priorities is not None:
            extra += b',"priorities":[%s]' % b",".join(b"%d" % priorities[turn] for turn in turns)
        return b'%s,%s,"id":"%s"}\n' % (raw[:-1], extra, self.internal_id.encode("ascii"))
