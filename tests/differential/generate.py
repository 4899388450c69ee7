"""Seeded generator of analysis queries for the differential check of the simulated engine against KataGo.

`generate(seed, count)` returns `count` cases, each one request line with a unique id and a category:

| category | what it holds |
|---|---|
| `game` | a random game on a random board (2x2 to 19x19, square or not), valid fields, any rules preset |
| `tiny` | a game (wild half the time) on a 2x2 to 5x4 board: captures, single and multi-stone suicide, ko, repetition |
| `wild` | a wild game on any board: moves on occupied points, suicides, same player twice, passes |
| `ko` | a ko fight (captures, retakes, passes, threats) analysed at every turn: simple-ko and superko bans |
| `setup` | `initialStones` (captures and suicides while placing, duplicates) and `initialPlayer` |
| `rules` | rules presets, aliases, legacy strings, rules objects and JSON strings, valid and not, plus komi |
| `fields` | a game plus one to four optional fields, each with a valid, edge or wrong value |
| `settings` | a game plus `overrideSettings`: search parameters valid and not, cfg keys, unknown keys |
| `coords` | vertices written oddly: lower case, spaces, padding, `(x,y)` (off-board too), junk |
| `types` | required fields missing, of the wrong type or out of range |
| `unknown` | unknown and misspelt fields (warnings), `action`/`terminateId` on a query |
| `lines` | lines a broken or hostile client sends: cut, bytes inserted (NUL, control characters, quotes, escapes,
  literals, numbers), not objects, no string id, unknown actions, nested thousands of levels (`rawlines.py`) |
| `numbers` | integers past int64/uint64 and doubles around 10^15 in every integer field, komi, rules, overrides,
  unknown fields, and echoed by `clear_cache` (`edges.py`) |
| `human` | `humanSLProfile` in `overrideSettings`: valid, unset and unknown profiles, with other keys |

Every query asks for few visits (1 to 4, or the cfg's default) so that the real engine answers thousands fast.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from kgserve.katago._nlohmann import NlohmannError
from kgserve.katago._nlohmann import loads as nlohmann_loads
from tests.differential.edges import human_settings, number_echo, number_fields
from tests.differential.fields import FIELD_MAKERS, UNKNOWN_FIELDS, location_text, rules_value
from tests.differential.games import Game, random_game
from tests.differential.kos import ko_fight
from tests.differential.rawlines import raw_line

__all__ = ["CATEGORIES", "Case", "generate"]

CATEGORIES = {
    "game": 0.2,
    "tiny": 0.14,
    "wild": 0.08,
    "ko": 0.06,
    "setup": 0.08,
    "rules": 0.1,
    "fields": 0.16,
    "settings": 0.04,
    "coords": 0.06,
    "types": 0.05,
    "unknown": 0.03,
    "lines": 0.08,
    "numbers": 0.05,
    "human": 0.02,
}


@dataclass(frozen=True)
class Case:
    id: str
    category: str
    line: str  # bytes that are not UTF-8 (`lines` only) as surrogate escapes: encode with "surrogateescape"

    def query(self) -> dict[str, Any] | None:
        """The request as KataGo reads it, when the line is an object (not for most `lines` cases)."""
        try:  # as KataGo reads it
            value = nlohmann_loads(self.line.encode("utf-8", errors="surrogateescape"))
        except NlohmannError:
            return None
        return value if isinstance(value, dict) else None


def _board_size(rng: random.Random, tiny: bool) -> tuple[int, int]:
    if tiny:
        return rng.randint(2, 5), rng.randint(2, 4)
    side = rng.choice([2, 3, 4, 5, 6, 7, 9, 9, 11, 13, 13, 19, 19])
    if rng.random() < 0.3:
        return side, rng.randint(2, 19)
    return side, side


def _game(rng: random.Random, tiny: bool = False, wild: bool = False, n_initial: int = 0) -> Game:
    xs, ys = _board_size(rng, tiny)
    length = rng.randint(0, min(3 * xs * ys, 120 if not wild else 60))
    return random_game(rng, xs, ys, length, n_initial, wild)


def _base(case_id: str, rng: random.Random, game: Game) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": case_id,
        "boardXSize": game.x_size,
        "boardYSize": game.y_size,
        "rules": rules_value(rng) if rng.random() < 0.3 else rng.choice(["tromp-taylor", "chinese", "japanese"]),
        "moves": [list(m) for m in game.moves],
    }
    if game.initial:
        body["initialStones"] = [list(m) for m in game.initial]
    if rng.random() < 0.85:
        body["maxVisits"] = rng.randint(1, 4)
    if rng.random() < 0.3:
        n = len(game.moves)
        body["analyzeTurns"] = sorted(rng.sample(range(n + 1), min(n + 1, rng.randint(1, 3))))
    if rng.random() < 0.5:  # the policy's -1 entries show which moves the engine holds illegal
        body["includePolicy"] = True
    return body


def _fields(case_id: str, rng: random.Random) -> dict[str, Any]:
    game = _game(rng, tiny=rng.random() < 0.4)
    body = _base(case_id, rng, game)
    for key in rng.sample(sorted(FIELD_MAKERS), rng.randint(1, 4)):
        body[key] = FIELD_MAKERS[key](rng, game)
    return body


def _setup(case_id: str, rng: random.Random) -> dict[str, Any]:
    tiny = rng.random() < 0.5
    xs, ys = _board_size(rng, tiny)
    game = random_game(rng, xs, ys, rng.randint(0, 6), rng.randint(1, max(1, xs * ys)), rng.random() < 0.5)
    body = _base(case_id, rng, game)
    if rng.random() < 0.5:
        body["initialPlayer"] = rng.choice(["b", "w", "B", "W", "black", "white"])
    if rng.random() < 0.3:
        body["moves"] = []
        body.pop("analyzeTurns", None)
    return body


def _coords(case_id: str, rng: random.Random) -> dict[str, Any]:
    game = _game(rng, tiny=rng.random() < 0.5)
    body = _base(case_id, rng, game)
    body.pop("analyzeTurns", None)
    field = "initialStones" if rng.random() < 0.3 else "moves"
    entries = body.setdefault(field, [])
    x, y = rng.randrange(game.x_size), rng.randrange(game.y_size)
    entries.insert(rng.randint(0, len(entries)), [rng.choice("bw"), location_text(rng, game, x, y)])
    return body


def _types(case_id: str, rng: random.Random) -> dict[str, Any]:
    game = _game(rng, tiny=True)
    body = _base(case_id, rng, game)
    key = rng.choice(["boardXSize", "boardYSize", "moves", "rules", "initialStones"])
    roll = rng.random()
    if roll < 0.2:
        body.pop(key, None)
        return body
    bad: dict[str, list[Any]] = {
        "boardXSize": [0, 1, 20, 25, -3, 9.0, "9", True, None, [9]],
        "boardYSize": [1, 20, 9.5, "19", False, None],
        "moves": [{}, "B A1", None, [["b"]], [["b", "A1", "x"]], [[1, "A1"]], [["b", 3]], [["x", "A1"]], [[]], ["A1"]],
        "rules": [5, None, [], True, 1.5],
        "initialStones": [{}, [["b", "pass"]], [["w", None]], [["black", "A1"]], "A1"],
    }
    body[key] = rng.choice(bad[key])
    return body


def _unknown(case_id: str, rng: random.Random) -> dict[str, Any]:
    body = _base(case_id, rng, _game(rng, tiny=rng.random() < 0.5))
    for key in rng.sample(sorted(UNKNOWN_FIELDS), rng.randint(1, 3)):
        body[key] = rng.choice(UNKNOWN_FIELDS[key])
    return body


def _numbers(case_id: str, rng: random.Random) -> dict[str, Any]:
    if rng.random() < 0.15:
        return number_echo(rng, case_id)
    game = _game(rng, tiny=True)
    body = _base(case_id, rng, game)
    number_fields(rng, body, len(game.moves))
    return body


def _body(category: str, case_id: str, rng: random.Random) -> dict[str, Any]:
    if category == "game":
        return _base(case_id, rng, _game(rng))
    if category == "tiny":
        return _base(case_id, rng, _game(rng, tiny=True, wild=rng.random() < 0.5))
    if category == "wild":
        return _base(case_id, rng, _game(rng, wild=True))
    if category == "ko":
        return ko_fight(rng, case_id)
    if category == "setup":
        return _setup(case_id, rng)
    if category == "rules":
        body = _base(case_id, rng, _game(rng, tiny=rng.random() < 0.5))
        body["rules"] = rules_value(rng)
        if rng.random() < 0.3:
            body["komi"] = FIELD_MAKERS["komi"](rng, _game(rng, tiny=True))
        return body
    if category == "fields":
        return _fields(case_id, rng)
    if category == "settings":
        game = _game(rng, tiny=rng.random() < 0.5)
        body = _base(case_id, rng, game)
        body["overrideSettings"] = FIELD_MAKERS["overrideSettings"](rng, game)
        return body
    if category == "coords":
        return _coords(case_id, rng)
    if category == "types":
        return _types(case_id, rng)
    if category == "numbers":
        return _numbers(case_id, rng)
    if category == "human":
        body = _base(case_id, rng, _game(rng, tiny=True))
        body["overrideSettings"] = human_settings(rng)
        return body
    return _unknown(case_id, rng)


def generate(seed: int, count: int, only: tuple[str, ...] = ()) -> list[Case]:
    """`count` seeded cases; `only`: from these categories alone (their weights kept)."""
    rng = random.Random(seed)
    names, weights = zip(*[(name, w) for name, w in CATEGORIES.items() if not only or name in only], strict=True)
    cases = []
    for n in range(count):
        category = rng.choices(names, weights)[0]
        case_id = f"{category}-{seed}-{n}"
        if category == "lines":
            line = raw_line(case_id, rng, lambda: _base(case_id, rng, _game(rng, tiny=True)))  # noqa: B023
            cases.append(Case(case_id, category, line))
            continue
        body = _body(category, case_id, rng)
        keys = list(body)
        rng.shuffle(keys)  # KataGo's answers must not depend on the order of a query's fields
        cases.append(Case(case_id, category, json.dumps({k: body[k] for k in keys}, ensure_ascii=False)))
    return cases
