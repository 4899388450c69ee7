"""How a query ends, whatever ends it, when its turns may be held in kgserve, written to one engine or to several
(kgserve.engine.dispatch): every turn is settled exactly once, as KataGo would settle it.

- `abort` (a client's terminate, its disconnect, its deadline): turns still held are answered at once with
  KataGo's line for a queued turn terminated before it started (`noResults`, katago-reference
  `protocol/terminate_queued`); written pieces are sent KataGo's `terminate` and their last lines come from the
  engine; AbortTimeout when they have not all come within `abort_timeout_s`. A terminate of some `turnNumbers`
  does the same for those turns only.
- an error line of one piece ends the query with it (the other pieces would get the same line: dropped).
- an engine's death ends its pieces' queries with EngineDied; their pieces on other engines are terminated and
  dropped; held turns wait for another engine, or end with the same error when no engine is left ready.
- `close` (shutdown, KataGo's terminate_all): held turns answered as queued ones; the engines answer the rest.

The Settler is the dispatch's part that ends queries: it owns no turns (the held queue is the dispatch's, handed in;
what a piece taken off frees, `release` counts) and reaches the engines only through kgserve.engine.stream's
EngineLine.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from kgserve.engine.errors import AbortTimeout, EngineDied
from kgserve.engine.heldqueue import HeldQueue
from kgserve.engine.stream import EngineLine, Piece, QueryStream
from kgserve.katago.protocol import analysed_turns, no_results_line

__all__ = ["Settler"]


class Settler:
    """The ending part of kgserve.engine.dispatch.Dispatch: every query's end, whatever ends it."""

    def __init__(
        self,
        queue: HeldQueue,
        ready: Callable[[], Sequence[EngineLine]],
        release: Callable[[Piece, int], None],
        abort_timeout_s: float,
    ) -> None:
        self.queue = queue  # the dispatch's held turns: those of a query ending are dropped from it
        self._ready = ready  # the engines that take queries now
        self._release = release  # `turns` of a piece taken off its engine without an answer: counted free
        self.abort_timeout_s = abort_timeout_s
        self.closed = False

    # -- a client's terminate ------------------------------------------------------------------------------
    def abort(self, stream: QueryStream, turns: frozenset[int] | None = None) -> None:
        """KataGo `terminate` for the query (only `turns` of it, when given): its last lines still come."""
        if stream.done:
            return
        if turns is None:
            if stream.aborted:
                return
            stream.aborted = True
            if stream.router is not None:
                stream.router.counters["aborted"] += 1
            self._answer_unwritten(stream, None)
            for piece in stream.pieces:
                piece.router.terminate(piece)
        else:
            claimed = stream.claim_turns(turns)
            if not claimed:
                return
            self._answer_unwritten(stream, frozenset(claimed))
            for piece in stream.pieces:
                mine = claimed if piece.turns is None else sorted(set(piece.turns).intersection(claimed))
                if mine:
                    piece.router.terminate(piece, mine)
        if stream.finals_left <= 0 and not stream.pieces:
            self.settle(stream, None)
        elif turns is None and stream._abort_timer is None:
            loop = asyncio.get_running_loop()
            stream._abort_timer = loop.call_later(self.abort_timeout_s, self._abort_expired, stream)

    def _answer_unwritten(self, stream: QueryStream, turns: frozenset[int] | None) -> None:
        """KataGo's answer to a terminate of turns still queued: `noResults` for each (the whole query's analysed
        turns, for a query held whole)."""
        plan = stream.plan
        if plan is None or plan.left <= 0:
            return
        if turns is not None and not plan.split:
            # held whole: KataGo would answer a terminate of its one turn (a query of several is one it refuses)
            analysed = analysed_turns(stream.query.body)
            if len(analysed) != 1 or not analysed <= turns:
                return
            turns = None
        dropped = plan.drop(turns)
        self.queue.dropped(stream, len(dropped))
        for turn in dropped:
            answered = sorted(analysed_turns(stream.query.body)) if turn is None else [turn]
            for each in answered:
                stream._push(no_results_line(stream.caller_id_json, each))
            stream.finals_left = 0 if turn is None else stream.finals_left - 1

    def _abort_expired(self, stream: QueryStream) -> None:
        stream._abort_timer = None
        label = stream.router.label if stream.router is not None else "the engine"
        self.settle(stream, AbortTimeout(f"{label} did not answer terminate within {self.abort_timeout_s:g}s"))

    # -- the end of a query --------------------------------------------------------------------------------
    def settle(self, stream: QueryStream, error: BaseException | None) -> None:
        """The query is over (all its lines came, an error line, `error`): nothing more of it is passed on."""
        if stream.done:
            return
        plan = stream.plan
        if plan is not None and plan.left > 0:
            self.queue.dropped(stream, len(plan.drop()))
        for piece in list(stream.pieces):
            if isinstance(error, AbortTimeout):  # given up: its threads count as free, its lines go unrouted
                self._release(piece, piece.router.drop(piece))
            else:
                piece.router.orphan(piece)
        stream.pieces.clear()
        stream._settle(error)
        if stream.router is not None:
            stream.router.counters["died" if isinstance(error, EngineDied) else "finished"] += 1

    def engine_gone(self, router: EngineLine, pieces: list[Piece], error: EngineDied) -> None:
        """An engine exited (its router already emptied): its pieces' queries end with `error`."""
        for piece in pieces:
            self._release(piece, piece.finals_left)
            stream = piece.stream
            if piece in stream.pieces:
                stream.pieces.remove(piece)
            if not piece.orphan and not stream.done:
                self.settle(stream, error)
        router.load.in_engine = 0
        if not [other for other in self._ready() if other is not router]:
            # no engine left to take them: held queries end as KataGo's queued ones would
            for stream in self.queue.streams_of():
                self.settle(stream, error)

    def close(self) -> None:
        """Shutdown (terminate_all): held turns answered as queued ones; the engines answer the written ones."""
        self.closed = True
        for stream in self.queue.streams_of():
            if stream.done:
                continue
            self._answer_unwritten(stream, None)
            if stream.finals_left <= 0 and not stream.pieces:
                self.settle(stream, None)
