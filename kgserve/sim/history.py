"""The part of KataGo's BoardHistory (game/boardhistory.cpp) that decides what the analysis engine reports:
which moves of a query's history are illegal, and which moves are illegal at an analysed position.

Replay (makeBoardMoveTolerant) rejects only occupied points and single-stone suicide. At the analysed position
the legal moves are BoardHistory::isLegal: not the simple-ko point, no suicide the rules forbid, and no
superko repetition under positional or situational ko rules (a ban computed after each move, as KataGo does,
against the positions since the history was last cleared: a move by the player not expected to move clears
it, and so does a pass that takes the button).
"""

from __future__ import annotations

from kgserve.katago.rules import Rules
from kgserve.sim.board import EMPTY, PASS, Board, opponent

__all__ = ["Replay"]


class Replay:
    def __init__(self, board: Board, to_move: int, rules: Rules) -> None:
        self.board = board
        self.rules = rules
        self._clear(to_move)

    def _key(self, to_move: int) -> tuple[int, ...]:
        situational = self.rules.ko in ("SITUATIONAL", "SIMPLE")
        return (*self.board.stones, to_move if situational else EMPTY)

    def _clear(self, to_move: int) -> None:
        self.to_move = to_move
        self.history = [self._key(to_move)]
        self.ever_occupied = {i for i, c in enumerate(self.board.stones) if c != EMPTY}
        self.superko_banned: set[int] = set()
        self.has_button = self.rules.button

    def play(self, loc: int, player: int) -> bool:
        """Replay one history move; False when KataGo reports it as an illegal move."""
        if player != self.to_move:
            self.board.ko_loc = None
            self._clear(player)
        if not self.board.tolerant_ok(loc, player):
            return False
        if loc == PASS and self.has_button:
            self.has_button = False
            self.history = []
        self.board.play(loc, player)
        self.to_move = opponent(player)
        self.history.append(self._key(self.to_move))
        if loc != PASS:
            self.ever_occupied.add(loc)
        self.superko_banned = self._superko_bans() if self.rules.ko != "SIMPLE" else set()
        return True

    def _superko_bans(self) -> set[int]:
        board, player = self.board, self.to_move
        seen = set(self.history)
        banned = set()
        for loc, color in enumerate(board.stones):
            if color != EMPTY:
                continue
            if loc not in self.ever_occupied and not board.is_suicide(loc, player):
                continue
            if board.is_illegal_suicide(loc, player, self.rules.suicide) or loc == board.ko_loc:
                continue
            after = board.copy()
            after.play(loc, player)
            situational = self.rules.ko in ("SITUATIONAL", "SIMPLE")
            if (*after.stones, opponent(player) if situational else EMPTY) in seen:
                banned.add(loc)
        return banned

    def illegal_points(self) -> frozenset[int]:
        """Points the player to move may not play (BoardHistory::isLegal); a pass is always legal."""
        board, player = self.board, self.to_move
        out = set(self.superko_banned)
        for loc, color in enumerate(board.stones):
            if color != EMPTY or loc == board.ko_loc or board.is_illegal_suicide(loc, player, self.rules.suicide):
                out.add(loc)
        return frozenset(out)
