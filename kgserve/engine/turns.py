"""A query's analysed turns as kgserve writes them to the engines: the plan of turns not yet written, and the pieces
written (one request line each, under an internal id of its own).

KataGo queues each turn of an `analyzeTurns` query as a task of its own, ordered by priority then arrival (turns of
one query: ascending turn number), and never preempts a running search. With the thread reserve on
(kgserve.engine.dispatch) kgserve does the same before the engine: a many-turn query is written a few turns at a
time, as threads free, each piece the client's own line with `analyzeTurns` (and `priorities`) narrowed to its
turns (the appended keys win: KataGo's JSON reader keeps the last of duplicate keys). KataGo prints each turn's
lines the same whichever query it came in (`turnNumber` is the turn's own), so the client's lines are unchanged
once the router restores its id.

A query is split only when KataGo would run every turn of it: `analyzeTurns` integers (after KataGo's conversion)
within the moves, `priorities` (if any) valid and as long; anything else it would refuse goes whole, for KataGo's
own error line. The fields KataGo checks besides are the same in every piece, so either every piece runs or every
piece gets the same error line (the router passes one on).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kgserve.katago._nlohmann import nlohmann_int
from kgserve.katago.priorities import read_priorities, read_priority
from kgserve.katago.protocol import DeferredJson, Query, encode_query, engine_line

if TYPE_CHECKING:
    from kgserve.engine.stream import QueryStream

__all__ = ["Key", "Piece", "TurnPlan", "plan_turns", "query_priority"]

Key = tuple[int, int, int]  # (-priority, arrival, turn rank): KataGo's queue order, smallest first


class TurnPlan:
    """A query's turns not yet written, in the order KataGo would start them: (-priority, rank, turn); turn None is
    the whole query as one line (a query of one turn, or one KataGo will refuse): the plan's only entry."""

    __slots__ = ("_dropped", "_entries", "_next", "left", "priorities", "split")

    def __init__(
        self, entries: Sequence[tuple[int, int, int | None]], *, split: bool, priorities: dict[int, int] | None
    ) -> None:
        self._entries = sorted(entries, key=lambda entry: entry[:2])
        self._next = 0
        self._dropped: set[int] = set()
        self.left = len(entries)  # turns still to write
        self.split = split  # pieces carry their own analyzeTurns
        self.priorities = priorities  # per turn, when the query has `priorities`

    def head(self, arrival: int) -> Key | None:
        """The queue key of the next turn to write."""
        entries = self._entries
        while self._next < len(entries):
            negative, rank, turn = entries[self._next]
            if turn is None or turn not in self._dropped:
                return (negative, arrival, rank)
            self._next += 1
        return None

    def take(self) -> int | None:
        """The next turn (None: the whole query), taken off."""
        self.head(0)
        turn = self._entries[self._next][2]
        self._next += 1
        self.left -= 1
        return turn

    def drop(self, turns: frozenset[int] | None = None) -> list[int | None]:
        """Turns not yet written, among `turns` (None: all of them), taken off: they are answered without the engine."""
        rest = self._entries[self._next :]
        waiting = [entry[2] for entry in rest if entry[2] is None or entry[2] not in self._dropped]
        if turns is not None:
            waiting = [turn for turn in waiting if turn is not None and turn in turns]
        self._dropped.update(turn for turn in waiting if turn is not None)
        if turns is None or None in waiting:
            self._next = len(self._entries)
        self.left -= len(waiting)
        return sorted(waiting, key=lambda turn: -1 if turn is None else turn)

    def restore(self, taken: list[int | None]) -> None:
        """Turns taken for an engine that never started them (a frozen one), to be written again."""
        restored = [entry for entry in self._entries[: self._next] if entry[2] in taken]
        self._entries = sorted([*restored, *self._entries[self._next :]], key=lambda entry: entry[:2])
        self._next = 0
        self.left += len(restored)


class Piece:
    """One request line written to an engine: some turns of a stream's query (None: the whole query)."""

    __slots__ = (
        "at_once", "count", "finals_left", "internal_id", "orphan", "router", "started", "stream", "taken", "turns",
        "written_at",
    )  # fmt: skip

    def __init__(self, stream: QueryStream, taken: list[int | None], count: int, internal_id: str, router: Any) -> None:
        self.stream = stream
        self.taken = taken  # what it took of the stream's plan (given back if it never starts)
        plan = stream.plan
        split = plan is not None and plan.split
        self.turns: list[int] | None = sorted(turn for turn in taken if turn is not None) if split else None
        self.count = count  # threads it holds until its finals come (one per turn)
        self.finals_left = count
        self.internal_id = internal_id
        self.router = router
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


def query_priority(body: dict[str, Any]) -> int:
    """The priority KataGo would queue the query with (`priorities`, one per turn: its highest), 0 when unset."""
    several = read_priorities(body["priorities"]) if "priorities" in body else None
    if several:
        return max(several)
    return read_priority(body.get("priority", 0)) or 0


def plan_turns(query: Query) -> TurnPlan:
    """The query's turns, split when KataGo would run every one of them and there are several."""
    body = query.body
    if query.expected_finals > 1:
        split = _split(body)
        if split is not None:
            turns, priorities, single = split
            ranks = {turn: rank for rank, turn in enumerate(sorted(turns))}
            entries = [(-(priorities[turn] if priorities else single), ranks[turn], turn) for turn in turns]
            return TurnPlan(entries, split=True, priorities=priorities)
    # written whole (the common query: its turn is not looked up, which would decode the moves kgserve's HTTP path
    # keeps as bytes; a terminate of some turns reads it, kgserve.engine.settle)
    return TurnPlan([(-query_priority(body), 0, None)], split=False, priorities=None)


def _split(body: dict[str, Any]) -> tuple[list[int], dict[int, int] | None, int] | None:
    """(distinct turns, priority per turn or None, the one priority) when KataGo would analyse every turn; else None."""
    raw_turns = body.get("analyzeTurns")
    moves = body.get("moves")
    if isinstance(moves, DeferredJson):
        moves = moves.value()
    if not isinstance(raw_turns, list) or not isinstance(moves, list):
        return None
    try:
        turns = [nlohmann_int(turn) for turn in raw_turns]
    except TypeError:
        return None
    if any(turn < 0 or turn > len(moves) for turn in turns):
        return None
    if "priorities" in body:
        values = read_priorities(body["priorities"])
        if "priority" in body or values is None or len(values) != len(turns):
            return None
        return sorted(set(turns)), dict(zip(turns, values, strict=True)), 0  # a turn given twice: its last priority
    single = read_priority(body.get("priority", 0))
    return (sorted(set(turns)), None, single) if single is not None else None
