"""The traffic kinds a job sends (`load.traffic`), each a source of queries for the load generator's workers:

- ``distinct`` (kgbench.load.traffic.QuerySource): one position a request, no two requests alike (prefixes x
  symmetries x komi, shuffled): what the NN cache cannot absorb.
- ``review``: one game a request, `analyzeTurns` over every turn of it (0 .. its last move), as a review service
  sends it (DodaGames' katago-server; KaTrain analyses every move of a loaded game). Workers share one order of
  games; many games are in flight at once.
- ``interactive``: each worker is a player stepping through one game a move at a time (turn 0, 1, 2, ...), one
  query in flight, with `reportDuringSearchEvery` (what KaTrain shows while it thinks; `load.report_every_s: null`:
  without, a client analysing a game one position a request); at the game's end the player opens the next game of
  the shared order.
- ``batch`` (kgbench.load.batch): a bulk analysis client: the 19x19 games' positions in file order, one a query
  (`analyzeTurns: [n]`, no `maxVisits` with `load.max_visits: null`), every worker drawing from the one stream.
- ``mixed``: the workers of each level shared out between those kinds in the ratio `load.mix` (largest remainders:
  at concurrency 8 with review 0.5, interactive 0.25, distinct 0.25: 4, 2 and 2 workers).

Games come in variants (game, symmetry, komi offset): the first pass sends every game as played, shuffled; later
passes its other symmetries and komi offsets, so that a long job re-sends a game only when every variant was sent
(a variant the NN cache still held would be a repeat, counted in `position_repeat_rate`). Every job of a sweep sends
the same order (each starts its own engines, so no cache carries over): jobs review the same games, and their
turns/s compare. `distinct` keeps its own order (kgbench.load.traffic) and, in a sweep, its ledger.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kgbench.load.batch import BatchTraffic
from kgbench.load.games.library import load_library
from kgbench.load.traffic import (
    DEFAULT_KOMI_OFFSETS,
    FullGames,
    Game,
    QuerySource,
    checked_komi_offsets,
    load_games,
)
from kgbench.load.types import LoadSettings

__all__ = [
    "KINDS",
    "Client",
    "GameOrder",
    "InteractiveTraffic",
    "MixedTraffic",
    "ReviewTraffic",
    "Traffic",
    "apportion",
    "build_traffic",
    "games_for",
]

KINDS = ("distinct", "review", "interactive", "mixed", "batch")


class Client(Protocol):
    """What one worker draws its requests from: (traffic key, query body without id and maxVisits)."""

    kind: str

    def next(self) -> tuple[str, dict[str, Any]]: ...


class Traffic(Protocol):
    """A job's traffic: a client per closed-loop worker (worker ``index`` of a level of ``concurrency`` workers; a new
    level asks again)."""

    kind: str

    @property
    def sent(self) -> int:
        """Requests handed out so far."""
        ...

    @property
    def repeats(self) -> int:
        """Of them, those that repeated a position or game variant sent before."""
        ...

    @property
    def size(self) -> int:
        """Distinct things it can send before a repeat (positions, or game variants)."""
        ...

    def client(self, index: int, concurrency: int) -> Client: ...

    def repeat_rate(self) -> float: ...


@dataclass(frozen=True)
class Variant:
    game: int
    symmetry: int
    komi_index: int


class GameOrder:
    """The games in variants, in a seeded order: pass 0 every game as played (symmetry 0, komi as played), shuffled;
    then the other variants, a shuffled pass each. ``next`` after the last variant starts again (repeats)."""

    def __init__(
        self,
        games: Sequence[Game],
        *,
        seed: int = 0,
        symmetries: int = 8,
        komi_offsets: Sequence[float] = DEFAULT_KOMI_OFFSETS,
        min_moves: int = 1,
    ) -> None:
        offsets = checked_komi_offsets(symmetries, komi_offsets)
        self.games = [g for g in games if len(g.moves) >= min_moves]
        if not self.games:
            raise ValueError(f"no game with at least {min_moves} move(s) to send")
        self.komi_offsets = tuple(sorted(offsets, key=abs))  # the komi as played (offset 0) first
        self.variants = [(s, k) for s in range(symmetries) for k in range(len(self.komi_offsets))]
        self._rng = random.Random(seed)
        self._order: list[int] = []
        self._at = 0
        self._pass = -1
        self.sent = 0
        self.repeats = 0
        self._queries = FullGames(self.games)

    @property
    def size(self) -> int:
        return len(self.games) * len(self.variants)

    def next(self) -> Variant:
        if self._at >= len(self._order):
            self._pass += 1
            self._order = list(range(len(self.games)))
            self._rng.shuffle(self._order)
            self._at = 0
        game = self._order[self._at]
        self._at += 1
        symmetry, komi_index = self.variants[self._pass % len(self.variants)]
        self.sent += 1
        if self._pass >= len(self.variants):
            self.repeats += 1
        return Variant(game, symmetry, komi_index)

    def key(self, v: Variant, turn: int | None = None) -> str:
        name = self.games[v.game].name
        where = "" if turn is None else f":{turn}"
        return f"{name}{where}:s{v.symmetry}:k{self.komi_offsets[v.komi_index]:+g}"

    def query(self, v: Variant, prefix: int | None = None) -> dict[str, Any]:
        """The variant's game as a query (moves up to ``prefix``, default all), without id, maxVisits, turns."""
        return self._queries.query(v.game, v.symmetry, prefix, self.komi_offsets[v.komi_index])

    def repeat_rate(self) -> float:
        return self.repeats / self.sent if self.sent else 0.0


class _FromGameOrder:
    """What a traffic kind drawing from a GameOrder reports of it: the positions or games it holds, sent, repeated."""

    order: GameOrder

    @property
    def size(self) -> int:
        return self.order.size

    @property
    def sent(self) -> int:
        return self.order.sent

    @property
    def repeats(self) -> int:
        return self.order.repeats

    def repeat_rate(self) -> float:
        return self.order.repeat_rate()


class ReviewTraffic(_FromGameOrder):
    """One game a request, every turn analysed; every worker draws the next game of the shared order."""

    kind = "review"

    def __init__(self, order: GameOrder) -> None:
        self.order = order

    def client(self, index: int, concurrency: int) -> ReviewTraffic:
        return self

    def next(self) -> tuple[str, dict[str, Any]]:
        variant = self.order.next()
        body = self.order.query(variant)
        body["analyzeTurns"] = list(range(len(body["moves"]) + 1))
        return self.order.key(variant), body


class Player:
    """One interactive client: a game stepped through a move at a time, then the next game of the order."""

    kind = "interactive"

    def __init__(self, order: GameOrder, report_every_s: float | None) -> None:
        self.order = order
        self.report_every_s = report_every_s
        self.variant = order.next()
        self.turn = 0
        self.turns_in_game = len(order.games[self.variant.game].moves) + 1

    def next(self) -> tuple[str, dict[str, Any]]:
        if self.turn >= self.turns_in_game:
            self.variant, self.turn = self.order.next(), 0
            self.turns_in_game = len(self.order.games[self.variant.game].moves) + 1
        body = self.order.query(self.variant, self.turn)
        if self.report_every_s is not None:
            body["reportDuringSearchEvery"] = self.report_every_s
        key = self.order.key(self.variant, self.turn)
        self.turn += 1
        return key, body


class InteractiveTraffic(_FromGameOrder):
    """A player per worker; the players of a level share the game order (two players never open one game's
    variant at once, until every variant was opened)."""

    kind = "interactive"

    def __init__(self, order: GameOrder, report_every_s: float | None) -> None:
        if report_every_s is not None and not report_every_s > 0:
            raise ValueError(f"load.report_every_s must be > 0 or null, got {report_every_s!r}")
        self.order = order
        self.report_every_s = report_every_s

    def client(self, index: int, concurrency: int) -> Player:
        return Player(self.order, self.report_every_s)


def apportion(total: int, shares: Mapping[str, float]) -> dict[str, int]:
    """``total`` workers shared out in proportion to ``shares`` (largest remainders; ties in the given order)."""
    weight = sum(shares.values())
    if total < 0 or weight <= 0 or any(v < 0 for v in shares.values()):
        raise ValueError(f"cannot share {total} workers by {dict(shares)}")
    exact = {k: total * v / weight for k, v in shares.items()}
    counts = {k: int(x) for k, x in exact.items()}
    by_remainder = sorted(shares, key=lambda k: -(exact[k] - counts[k]))
    for k in by_remainder[: total - sum(counts.values())]:
        counts[k] += 1
    return counts


class MixedTraffic:
    """Each level's workers shared out between kinds in the ratio ``mix`` (worker i's kind by its index)."""

    kind = "mixed"

    def __init__(self, parts: Mapping[str, Traffic], mix: Mapping[str, float]) -> None:
        unknown = sorted(set(mix) - set(parts))
        if unknown or not any(v > 0 for v in mix.values()):
            raise ValueError(f"load.mix must give a share > 0 to some of {sorted(parts)}, got {dict(mix)}")
        self.parts = dict(parts)
        self.mix = {k: float(v) for k, v in mix.items() if v > 0}

    def plan(self, concurrency: int) -> list[str]:
        """Worker i's kind at a level of ``concurrency`` workers."""
        counts = apportion(concurrency, self.mix)
        return [kind for kind in self.mix for _ in range(counts[kind])]

    def _sources(self) -> list[Any]:
        """The parts' own sources, each once (review and interactive share one game order)."""
        return list({id(o): o for o in (getattr(p, "order", p) for p in self.parts.values())}.values())

    @property
    def size(self) -> int:
        return sum(int(o.size) for o in self._sources())

    @property
    def sent(self) -> int:
        return sum(int(o.sent) for o in self._sources())

    @property
    def repeats(self) -> int:
        return sum(int(o.repeats) for o in self._sources())

    def client(self, index: int, concurrency: int) -> Client:
        plan = self.plan(max(concurrency, index + 1))
        return self.parts[plan[index]].client(index, concurrency)

    def repeat_rate(self) -> float:
        sent = self.sent
        return self.repeats / sent if sent else 0.0


def games_for(game_set: str) -> list[Game]:
    """The games of ``load.games``: the real games of the repository (selfplay) or the sample queries (samples)."""
    return load_library() if game_set == "selfplay" else load_games()


def build_traffic(
    load: LoadSettings, distinct: QuerySource | None = None, games: Sequence[Game] | None = None
) -> Traffic:
    """The traffic ``load.traffic`` names, built from ``games`` (default: ``load.game_set``'s); ``distinct``: the
    positions source to use for distinct requests (a sweep's job: its ledger's), else one of its own."""
    pool = list(games) if games is not None else games_for(load.game_set)
    if load.traffic == "distinct":
        return distinct if distinct is not None else QuerySource(pool, seed=load.seed)
    if load.traffic == "batch":
        return BatchTraffic(pool)
    order = GameOrder(pool, seed=load.seed)
    review, interactive = ReviewTraffic(order), InteractiveTraffic(order, load.report_every_s)
    if load.traffic == "review":
        return review
    if load.traffic == "interactive":
        return interactive
    parts: dict[str, Traffic] = {"review": review, "interactive": interactive}
    if load.mix.get("distinct", 0) > 0:
        parts["distinct"] = distinct if distinct is not None else QuerySource(pool, seed=load.seed)
    return MixedTraffic(parts, load.mix)
