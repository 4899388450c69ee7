"""What an engine's router tells the part that holds the turns (kgserve.engine.dispatch.Dispatch): the router starts
pieces and reads the engine's lines; which turns go next, what they cost and how a query ends are not its to decide.

The contract lives here, below both, so the router depends on it and never on the dispatch (whose rule reads the
routers through kgserve.engine.stream.EngineLine in turn): the engine wing's imports run one way.
"""

from __future__ import annotations

from typing import Protocol

from kgserve.engine.errors import EngineDied
from kgserve.engine.stream import EngineLine, Piece, QueryStream

__all__ = ["TurnHolder"]


class TurnHolder(Protocol):
    """Who holds the turns of every engine's queries (one per pool): what a router reports back to it."""

    abort_timeout_s: float  # how long an orphan piece's threads stay counted without an answer

    def turns_over(self, piece: Piece, turns: int, visits: int) -> None:
        """`turns` of a written piece ended (a final line each, or an error line), having searched `visits`."""

    def gone(self, piece: Piece, turns: int) -> None:
        """`turns` of a piece taken off its engine without an answer."""

    def freed(self, line: EngineLine) -> None:
        """Threads of `line`'s engine freed: the holder may write more there."""

    def settle(self, stream: QueryStream, error: BaseException | None) -> None:
        """The query is over (all its lines came, an error line, `error`)."""

    def engine_gone(self, line: EngineLine, pieces: list[Piece], error: EngineDied) -> None:
        """An engine exited (its router already emptied): its pieces' queries end with `error`."""
