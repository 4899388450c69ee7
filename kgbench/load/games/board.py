"""A game replayed by the rules of Go, to check that a stored game is one KataGo could have played: no move on an
occupied point, no suicide, no immediate recapture of a ko (simple ko: KataGo's Japanese and Chinese rules), moves
alternating colours. Captures are made as the moves are played."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["IllegalMove", "Replayed", "replay"]

COLUMNS = "ABCDEFGHJKLMNOPQRSTUVWXYZ"
EMPTY, BLACK, WHITE = ".", "B", "W"


class IllegalMove(ValueError):
    """A move the rules forbid; ``index`` is its place in the move list (-1: a setup stone)."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(f"move {index + 1}: {message}" if index >= 0 else f"setup: {message}")
        self.index = index


@dataclass(frozen=True)
class Replayed:
    """The end of a legal replay: the final board (rows from the top, '.', 'B', 'W'), captures per colour."""

    rows: tuple[str, ...]
    captured: dict[str, int]
    passes: int


def _point(vertex: str, size: int, index: int) -> int:
    try:
        x = COLUMNS.index(vertex[0].upper())
        row = int(vertex[1:])
    except (ValueError, IndexError):
        raise IllegalMove(index, f"{vertex!r} is not a vertex") from None
    if not (0 <= x < size and 1 <= row <= size):
        raise IllegalMove(index, f"{vertex!r} is off the {size}x{size} board")
    return (size - row) * size + x


class _Board:
    def __init__(self, size: int) -> None:
        self.size = size
        self.stones = [EMPTY] * (size * size)
        self.ko: int | None = None  # the point the player to move may not take back at once

    def neighbours(self, p: int) -> Iterable[int]:
        x, y = p % self.size, p // self.size
        if x > 0:
            yield p - 1
        if x < self.size - 1:
            yield p + 1
        if y > 0:
            yield p - self.size
        if y < self.size - 1:
            yield p + self.size

    def group(self, p: int) -> tuple[set[int], bool]:
        """The group at p and whether it has a liberty."""
        colour, seen, todo, free = self.stones[p], {p}, [p], False
        while todo:
            for n in self.neighbours(todo.pop()):
                if self.stones[n] == EMPTY:
                    free = True
                elif self.stones[n] == colour and n not in seen:
                    seen.add(n)
                    todo.append(n)
        return seen, free

    def play(self, colour: str, p: int, index: int) -> int:
        """Place a stone; returns the stones it captured. IllegalMove when the rules forbid it."""
        if self.stones[p] != EMPTY:
            raise IllegalMove(index, "the point is occupied")
        if p == self.ko:
            raise IllegalMove(index, "takes back a ko at once")
        self.stones[p] = colour
        other = WHITE if colour == BLACK else BLACK
        taken: set[int] = set()
        for n in self.neighbours(p):
            if self.stones[n] == other and n not in taken:
                group, free = self.group(n)
                if not free:
                    taken |= group
        for q in taken:
            self.stones[q] = EMPTY
        own, free = self.group(p)
        if not free:
            self.stones[p] = EMPTY
            raise IllegalMove(index, "suicide")
        # simple ko: a lone stone that captured exactly one stone and has exactly one liberty
        self.ko = next(iter(taken)) if len(taken) == 1 and len(own) == 1 and self._liberties(p) == 1 else None
        return len(taken)

    def _liberties(self, p: int) -> int:
        return sum(1 for n in self.neighbours(p) if self.stones[n] == EMPTY)


def replay(
    size: int, moves: Sequence[tuple[str, str]], setup: Sequence[tuple[str, str]] = (), first: str | None = None
) -> Replayed:
    """Play ``moves`` (colour, GTP vertex or pass) from the ``setup`` stones; IllegalMove at the first move the rules
    forbid, or a colour out of turn (``first``: who moves first; default the first move's colour)."""
    board = _Board(size)
    for colour, vertex in setup:
        p = _point(vertex, size, -1)
        if board.stones[p] != EMPTY:
            raise IllegalMove(-1, f"two setup stones on {vertex}")
        board.stones[p] = colour
    captured = {BLACK: 0, WHITE: 0}
    expected = first or (moves[0][0] if moves else BLACK)
    passes = 0
    for index, (colour, vertex) in enumerate(moves):
        if colour not in (BLACK, WHITE):
            raise IllegalMove(index, f"colour {colour!r} is neither B nor W")
        if colour != expected:
            raise IllegalMove(index, f"{colour} plays out of turn")
        expected = WHITE if colour == BLACK else BLACK
        if vertex.lower() == "pass":
            board.ko = None
            passes += 1
            continue
        captured[colour] += board.play(colour, _point(vertex, size, index), index)
    rows = tuple("".join(board.stones[r * size : (r + 1) * size]) for r in range(size))
    return Replayed(rows, captured, passes)
