"""A query's analysed turns as kgserve writes them to the engines: the plan of turns not yet written (the pieces
written, one request line each under an internal id of its own, are kgserve.engine.stream's `Piece`).

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

from collections.abc import Sequence
from typing import Any

from kgserve.katago._nlohmann import nlohmann_int
from kgserve.katago.priorities import read_priorities, read_priority
from kgserve.katago.protocol import DeferredJson, Query

__all__ = ["Key", "TurnPlan", "plan_turns", "query_priority"]

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
