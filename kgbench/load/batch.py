"""``load.traffic: batch``: a bulk analysis client's traffic (load=batch). Its users extract positions from KataGo
self-play records and send them from ONE process at high concurrency, one position a query (`analyzeTurns: [n]`
over the game's moves up to turn n, rules and komi from the record, no `maxVisits`: the cfg's), in the order of
their files: each game's positions one after another (turn 1, 2, ..., its last move), then the next game's.

Every worker of a level draws from that one stream (N in flight are N consecutive positions, a few games' worth at
once: what the NN cache sees from such a client). Past the last position the stream starts again, on the games'
next board symmetry (a new position to the net, the record's rules and komi kept), so that a long job sends a
position twice only after all 8 symmetries of every position were sent (a repeat, `position_repeat_rate`).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from typing import Any

from kgbench.load.traffic import FullGames, Game

__all__ = ["BATCH_BOARD", "BatchTraffic"]

BATCH_BOARD = 19  # the batch client's positions are 19x19 (its position files are grouped by board size)
_SYMMETRIES = 8


class BatchTraffic:
    """The positions of ``games`` in file order, one a query; every worker shares the stream."""

    kind = "batch"

    def __init__(self, games: Sequence[Game], board: int = BATCH_BOARD) -> None:
        self.games = [g for g in games if g.size == board and g.moves]
        if not self.games:
            raise ValueError(f"load.traffic=batch: no {board}x{board} game with a move to send")
        # position i of a pass: game g's turn (i - starts[g] + 1); turn 0, the empty board, is no record's position
        self._starts = list(itertools.accumulate((len(g.moves) for g in self.games), initial=0))
        self._queries = FullGames(self.games)
        self.sent = 0
        self.repeats = 0

    @property
    def positions(self) -> int:
        """Positions in one pass over the games."""
        return self._starts[-1]

    @property
    def size(self) -> int:
        """Distinct positions it sends before a repeat: every position in each symmetry."""
        return self.positions * _SYMMETRIES

    def client(self, index: int, concurrency: int) -> BatchTraffic:
        """Every closed-loop worker draws from the one stream (kgbench.load.kinds.Traffic)."""
        return self

    def next(self) -> tuple[str, dict[str, Any]]:
        number, at = divmod(self.sent, self.positions)
        symmetry = number % _SYMMETRIES
        self.sent += 1
        if number >= _SYMMETRIES:
            self.repeats += 1
        index = bisect.bisect_right(self._starts, at) - 1
        game, turn = self.games[index], at - self._starts[index] + 1
        body = self._queries.query(index, symmetry, turn)
        body["analyzeTurns"] = [turn]
        return f"{game.name}:{turn}:s{symmetry}", body

    def repeat_rate(self) -> float:
        return self.repeats / self.sent if self.sent else 0.0
