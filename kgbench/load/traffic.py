"""Traffic the NN cache cannot trivially absorb: distinct positions built from the sample games.

A position = (game, prefix length, board symmetry, komi). Every prefix of every sample game's move list
(for setups without moves: just the setup), times the 8 symmetries of the square board, times a few komi
values around the game's komi. Positions are served in a seeded random order and only repeat after the whole
set was used once; ``QuerySource.repeat_rate`` reports how often a position repeated.

The order is a series of passes, each a fresh shuffle of every position: offset ``o`` of the stream is position
``o % size`` of pass ``o // size``. A source walks its own offsets 0, 1, 2, ... unless it is given others: the
jobs of a sweep take theirs from the sweep's ledger (kgbench.load.ledger), so that no two jobs send the same
position until the sweep has sent every one.
"""

from __future__ import annotations

import bisect
import itertools
import json
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgserve.paths import PROJECT_ROOT

DEFAULT_DIRS = (
    PROJECT_ROOT / "assets" / "analysis" / "inputs",
    PROJECT_ROOT / "tests" / "data" / "katago-reference" / "samples" / "inputs",
)
DEFAULT_KOMI_OFFSETS = (-1.0, -0.5, 0.0, 0.5, 1.0)
COLUMNS = "ABCDEFGHJKLMNOPQRSTUVWXYZ"  # GTP: no I
# Keys of a sample query that describe the analysed position, not the request; dropped from generated queries.
_DROPPED = ("id", "analyzeTurns", "maxVisits")


def checked_komi_offsets(symmetries: int, komi_offsets: Sequence[float]) -> tuple[float, ...]:
    """The komi offsets as floats, once the symmetries and offsets a traffic source varies a game by are valid."""
    if not 1 <= symmetries <= 8:
        raise ValueError("symmetries must be 1..8")
    if not komi_offsets:
        raise ValueError("komi_offsets must not be empty")
    return tuple(float(k) for k in komi_offsets)


def parse_vertex(vertex: str, size: int) -> tuple[int, int] | None:
    """GTP vertex ('C4') -> (x, y) with y counted from the bottom; None for pass."""
    if vertex.lower() == "pass":
        return None
    x = COLUMNS.index(vertex[0].upper())
    y = int(vertex[1:]) - 1
    if not (0 <= x < size and 0 <= y < size):
        raise ValueError(f"vertex {vertex!r} is off a {size}x{size} board")
    return x, y


def format_vertex(point: tuple[int, int] | None) -> str:
    return "pass" if point is None else f"{COLUMNS[point[0]]}{point[1] + 1}"


def transform_point(point: tuple[int, int], symmetry: int, size: int) -> tuple[int, int]:
    """Apply one of the 8 symmetries of a square board (0 = identity; bit 2 transposes, bits 0/1 flip)."""
    if not 0 <= symmetry < 8:
        raise ValueError(f"symmetry must be 0..7, got {symmetry}")
    x, y = point
    if symmetry & 4:
        x, y = y, x
    if symmetry & 1:
        x = size - 1 - x
    if symmetry & 2:
        y = size - 1 - y
    return x, y


def transform_vertex(vertex: str, symmetry: int, size: int) -> str:
    point = parse_vertex(vertex, size)
    return vertex if point is None else format_vertex(transform_point(point, symmetry, size))


def _transform_stones(stones: Iterable[Sequence[str]], symmetry: int, size: int) -> list[list[str]]:
    return [[colour, transform_vertex(v, symmetry, size)] for colour, v in stones]


@dataclass(frozen=True)
class Game:
    name: str
    base: dict[str, Any]  # the sample query without id/moves/analyzeTurns/maxVisits
    moves: tuple[tuple[str, str], ...]
    stones: tuple[tuple[str, str], ...]
    size: int
    komi: float

    @property
    def prefixes(self) -> int:
        return len(self.moves) + 1


def load_games(dirs: Sequence[Path] | None = None) -> list[Game]:
    """Read the sample queries (``*.json``) of the given directories; a game name seen twice is read once."""
    games: dict[str, Game] = {}
    for directory in dirs if dirs is not None else DEFAULT_DIRS:
        for path in sorted(Path(directory).glob("*.json")):
            query = json.loads(path.read_text())
            name = str(query.get("id") or path.stem)
            if name in games:
                continue
            x, y = int(query.get("boardXSize", 19)), int(query.get("boardYSize", 19))
            if x != y:
                raise ValueError(f"{path}: only square boards have 8 symmetries ({x}x{y})")
            base = {k: v for k, v in query.items() if k not in (*_DROPPED, "moves", "initialStones")}
            games[name] = Game(
                name=name,
                base=base,
                moves=tuple((c, v) for c, v in query.get("moves", [])),
                stones=tuple((c, v) for c, v in query.get("initialStones", [])),
                size=x,
                komi=float(query.get("komi", 7.5)),
            )
    if not games:
        raise ValueError(f"no sample queries (*.json) found in {[str(d) for d in (dirs or DEFAULT_DIRS)]}")
    return list(games.values())


@dataclass(frozen=True)
class Position:
    game: int
    prefix: int
    symmetry: int
    komi_index: int


def build_query(game: Game, prefix: int, symmetry: int, komi: float) -> dict[str, Any]:
    """The analysis query (without id and maxVisits) for one position."""
    body = dict(game.base)
    body["moves"] = _transform_stones(game.moves[:prefix], symmetry, game.size)
    if game.stones:
        body["initialStones"] = _transform_stones(game.stones, symmetry, game.size)
    for key in ("allowMoves", "avoidMoves"):
        if key in body:
            body[key] = [
                {**rule, "moves": [transform_vertex(v, symmetry, game.size) for v in rule.get("moves", [])]}
                for rule in body[key]
            ]
    body["komi"] = komi
    return body


class FullGames:
    """A query of any position of `games`, from a cache of each (game, symmetry)'s transformed full game: a
    position's query is then a slice of its moves (cheap), whichever traffic kind draws it (distinct, review,
    batch)."""

    def __init__(self, games: Sequence[Game]) -> None:
        self.games = games
        self._full: dict[tuple[int, int], dict[str, Any]] = {}

    def query(
        self, game: int, symmetry: int, prefix: int | None = None, komi_offset: float | None = None
    ) -> dict[str, Any]:
        """`build_query` of game number `game`'s first `prefix` moves (None: all) under `symmetry`, its komi as
        played plus `komi_offset` (None: as played, untouched)."""
        played = self.games[game]
        full = self._full.get((game, symmetry))
        if full is None:
            full = self._full[(game, symmetry)] = build_query(played, len(played.moves), symmetry, played.komi)
        body = dict(full)
        body["moves"] = full["moves"] if prefix is None else full["moves"][:prefix]
        if komi_offset is not None:
            body["komi"] = played.komi + komi_offset
        return body


class QuerySource:
    """Endless stream of distinct positions; ``next()`` -> (position key, query body without id/maxVisits).

    ``offsets``: where in the seeded order this source reads (default 0, 1, 2, ...; a sweep's job: the blocks its
    ledger reserves for it, increasing). An offset past the first pass is a repeat."""

    def __init__(
        self,
        games: Sequence[Game],
        *,
        seed: int = 0,
        symmetries: int = 8,
        komi_offsets: Sequence[float] = DEFAULT_KOMI_OFFSETS,
        offsets: Iterator[int] | None = None,
    ) -> None:
        self.komi_offsets = checked_komi_offsets(symmetries, komi_offsets)
        self.games = list(games)
        self.symmetries = symmetries
        self.seed = seed
        # position i is (game, prefix, symmetry, komi) in that nesting order, worked out from i (kgbench's game
        # library has ~10^6 of them: no list of them is kept)
        self._variants = symmetries * len(self.komi_offsets)
        self._starts = list(itertools.accumulate((g.prefixes for g in self.games), initial=0))
        self._queries = FullGames(self.games)
        self._offsets = offsets if offsets is not None else itertools.count()
        self._rng = random.Random(seed)
        self._pass = -1  # the pass whose shuffle is in self._order (passes are drawn in turn from self._rng)
        self._order: list[int] = []
        self.sent = 0
        self.repeats = 0

    @classmethod
    def from_dirs(cls, dirs: Sequence[Path | str] | None = None, **kwargs: Any) -> QuerySource:
        return cls(load_games([Path(d) for d in dirs] if dirs is not None else None), **kwargs)

    kind = "distinct"  # the traffic kind (kgbench.load.kinds)

    @property
    def size(self) -> int:
        """Number of distinct positions."""
        return self._starts[-1] * self._variants

    def position(self, index: int) -> Position:
        """The position at ``index`` of the enumeration (game, prefix, symmetry, komi)."""
        prefix_index, variant = divmod(index, self._variants)
        game = bisect.bisect_right(self._starts, prefix_index) - 1
        symmetry, komi_index = divmod(variant, len(self.komi_offsets))
        return Position(game, prefix_index - self._starts[game], symmetry, komi_index)

    def client(self, index: int, concurrency: int) -> QuerySource:
        """Every closed-loop worker draws from the one stream (kgbench.load.kinds.Traffic)."""
        return self

    def key(self, pos: Position) -> str:
        return f"{self.games[pos.game].name}:{pos.prefix}:s{pos.symmetry}:k{self.komi_offsets[pos.komi_index]:+g}"

    def query(self, pos: Position) -> dict[str, Any]:
        """Same as ``build_query``, from a per-(game, symmetry) cache of the transformed full game (cheap)."""
        return self._queries.query(pos.game, pos.symmetry, pos.prefix, self.komi_offsets[pos.komi_index])

    def _shuffled(self, number: int) -> list[int]:
        """Pass ``number`` of the order. Offsets only grow, so earlier passes are dropped (and redrawn from the
        seed in the rare case of a step back)."""
        if number < self._pass:
            self._rng, self._pass = random.Random(self.seed), -1
        while self._pass < number:
            self._order = list(range(self.size))
            self._rng.shuffle(self._order)
            self._pass += 1
        return self._order

    def next(self) -> tuple[str, dict[str, Any]]:
        number, at = divmod(next(self._offsets), self.size)
        index = self._shuffled(number)[-1 - at]  # from the end of each shuffle: the order of earlier versions
        self.sent += 1
        if number > 0:
            self.repeats += 1
        pos = self.position(index)
        return self.key(pos), self.query(pos)

    def repeat_rate(self) -> float:
        """Share of the positions handed out so far that had been handed out before (by this source, or with a
        ledger's offsets by any job of the sweep)."""
        return self.repeats / self.sent if self.sent else 0.0


class ShapedSource(QuerySource):
    """Distinct positions, with the response size steered: the sample's include* flags replaced by ``extra``."""

    def __init__(self, extra: dict[str, Any] | None = None, **kwargs: Any) -> None:
        source = QuerySource.from_dirs(**kwargs)
        super().__init__(source.games, seed=kwargs.get("seed", 0))
        self.extra = dict(extra or {})

    def next(self) -> tuple[str, dict[str, Any]]:
        key, body = super().next()
        body = {k: v for k, v in body.items() if not k.startswith("include")}
        body.update(self.extra)
        return key, body
