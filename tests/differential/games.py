"""Random Go games for the differential check: move lists rich in captures, suicides, ko and repetition.

The board here is the generator's own, written independently of `kgserve.katago.rules` (a check that reused the
sim's board could not find the sim's board bugs). It only steers the random play towards interesting points
(few liberties, recaptures, points just emptied); whether a move is legal is for the engines to say.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = ["Game", "random_game", "vertex"]

COLUMNS = "ABCDEFGHJKLMNOPQRST"


def vertex(x: int, y: int, y_size: int) -> str:
    return f"{COLUMNS[x]}{y_size - y}"


@dataclass
class _Board:
    xs: int
    ys: int
    cells: dict[tuple[int, int], str] = field(default_factory=dict)

    def adj(self, p: tuple[int, int]) -> list[tuple[int, int]]:
        x, y = p
        out = [(x - 1, y), (x + 1, y), (x, y - 1), (x, y + 1)]
        return [(a, b) for a, b in out if 0 <= a < self.xs and 0 <= b < self.ys]

    def chain(self, p: tuple[int, int]) -> tuple[set[tuple[int, int]], int]:
        color = self.cells[p]
        seen, stack, libs = {p}, [p], set()
        while stack:
            for n in self.adj(stack.pop()):
                c = self.cells.get(n)
                if c is None:
                    libs.add(n)
                elif c == color and n not in seen:
                    seen.add(n)
                    stack.append(n)
        return seen, len(libs)

    def play(self, p: tuple[int, int], color: str) -> list[tuple[int, int]]:
        """Place a stone, remove dead opponent chains, then a dead own chain; return the emptied points."""
        self.cells[p] = color
        emptied: list[tuple[int, int]] = []
        for n in self.adj(p):
            if self.cells.get(n) not in (None, color):
                group, libs = self.chain(n)
                if libs == 0:
                    emptied.extend(group)
        for q in emptied:
            self.cells.pop(q, None)
        own, libs = self.chain(p)
        if libs == 0:
            emptied.extend(own)
            for q in own:
                self.cells.pop(q, None)
        return emptied

    def empties(self) -> list[tuple[int, int]]:
        return [(x, y) for y in range(self.ys) for x in range(self.xs) if (x, y) not in self.cells]

    def single_suicide(self, p: tuple[int, int], color: str) -> bool:
        """Only opponent neighbours, none in atari: KataGo rejects such a move even while replaying history."""
        for n in self.adj(p):
            c = self.cells.get(n)
            if c is None or c == color or self.chain(n)[1] == 1:
                return False
        return True

    def liberties_at(self, p: tuple[int, int]) -> int:
        return sum(1 for n in self.adj(p) if n not in self.cells)


@dataclass
class Game:
    x_size: int
    y_size: int
    initial: list[tuple[str, str]]
    moves: list[tuple[str, str]]


def _pick_point(rng: random.Random, board: _Board, recent: list[tuple[int, int]], wild: bool) -> tuple[int, int] | None:
    empties = board.empties()
    roll = rng.random()
    if wild and roll < 0.03 and board.cells:  # an occupied point: KataGo rejects it
        return rng.choice(sorted(board.cells))
    if not empties:
        return None
    recent = [p for p in recent if p not in board.cells]
    if roll < 0.2 and recent:  # retake or refill a point just emptied: ko, snapback, repetition
        return rng.choice(recent)
    if roll < (0.45 if wild else 0.25):  # points with no or one liberty: captures and suicides (one or many stones)
        tight = [p for p in empties if board.liberties_at(p) <= 1]
        if tight:
            return rng.choice(tight)
    if roll < 0.75 and board.cells:  # contact play
        near = sorted({n for p in board.cells for n in board.adj(p) if n not in board.cells})
        if near:
            return rng.choice(near)
    return rng.choice(empties)


def random_game(rng: random.Random, x_size: int, y_size: int, length: int, n_initial: int, wild: bool) -> Game:
    board = _Board(x_size, y_size)
    initial: list[tuple[str, str]] = []
    for _ in range(n_initial):
        x, y = rng.randrange(x_size), rng.randrange(y_size)
        color = rng.choice("BW")
        initial.append((color.lower() if rng.random() < 0.5 else color, vertex(x, y, y_size)))
        board.play((x, y), color)
    moves: list[tuple[str, str]] = []
    to_move = rng.choice("BW")
    recent: list[tuple[int, int]] = []
    for _ in range(length):
        if rng.random() < 0.03:  # the same player twice: KataGo clears the ko state and goes on
            to_move = "B" if to_move == "W" else "W"
        point = None if rng.random() < 0.06 else _pick_point(rng, board, recent, wild)
        if point is not None and not wild and point not in board.cells and board.single_suicide(point, to_move):
            point = None  # a calm game keeps to moves the engine replays
        color = to_move.lower() if rng.random() < 0.8 else to_move
        if point is None:
            moves.append((color, rng.choice(["pass", "pass", "PASS", "Pass"])))
        else:
            moves.append((color, vertex(point[0], point[1], y_size)))
            if point not in board.cells:
                recent = board.play(point, to_move) + recent[:3]
        to_move = "B" if to_move == "W" else "W"
    return Game(x_size, y_size, initial, moves)
