"""Ko fights for the differential check: a ko shape set up by `initialStones`, then captures, retakes, passes and
threats elsewhere, every turn analysed with the policy (whose -1 entries show the simple-ko and superko bans).

Two passes between a capture and the retake lift the simple-ko ban but recreate an earlier position, which
positional and situational superko rules forbid and simple ko allows: that is the case this module is for.
"""

from __future__ import annotations

import random
from typing import Any

from tests.differential.games import vertex

__all__ = ["ko_fight"]

# x, y offsets inside a 4x3 box: black's stones, white's stones, black's capture point, white's retake point
_BLACK = [(1, 0), (0, 1), (1, 2)]
_WHITE = [(2, 0), (1, 1), (3, 1), (2, 2)]
_TAKE, _RETAKE = (2, 1), (1, 1)
KO_RULES = ["tromp-taylor", "chinese", "japanese", "aga", "new-zealand", "chinese-ogs", "stone-scoring", "korean"]


def ko_fight(rng: random.Random, case_id: str) -> dict[str, Any]:
    xs, ys = rng.randint(4, 9), rng.randint(3, 9)
    x0, y0 = rng.randint(0, xs - 4), rng.randint(0, ys - 3)
    flip = rng.random() < 0.5  # white takes first instead

    def at(p: tuple[int, int]) -> str:
        return vertex(x0 + p[0], y0 + p[1], ys)

    first, second = ("w", "b") if flip else ("b", "w")
    stones = [[first, at(p)] for p in _BLACK] + [[second, at(p)] for p in _WHITE]
    box = {(x0 + x, y0 + y) for x in range(4) for y in range(3)}
    outside = [(x, y) for x in range(xs) for y in range(ys) if (x, y) not in box]
    moves: list[list[str]] = [[first, at(_TAKE)]]
    to_move = second
    for _ in range(rng.randint(1, 7)):
        roll = rng.random()
        if roll < 0.4:
            move = "pass"
        elif roll < 0.7 or not outside:
            move = at(_RETAKE if to_move == second else _TAKE)
        else:
            move = vertex(*outside.pop(rng.randrange(len(outside))), ys)
        moves.append([to_move, move])
        to_move = first if to_move == second else second
    return {
        "id": case_id,
        "boardXSize": xs,
        "boardYSize": ys,
        "rules": rng.choice(KO_RULES),
        "initialStones": stones,
        "moves": moves,
        "analyzeTurns": list(range(len(moves) + 1)),
        "includePolicy": True,
        "maxVisits": rng.randint(1, 2),
    }
