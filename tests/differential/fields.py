"""Values for every query field KataGo's analysis engine reads: valid ones, edge ones and wrong ones.

Each maker takes the random source and the game being analysed and returns a value for its field. Values are
chosen so that the real engine stays well defined (no out-of-array locations in `allowMoves`, no analysed turn
that KataGo would reach through an `int` overflow) and cheap (few visits, few analysed turns).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from tests.differential.games import Game, vertex

__all__ = ["FIELD_MAKERS", "UNKNOWN_FIELDS", "location_text", "rules_value"]

PRESETS = [
    "tromp-taylor", "tromp_taylor", "tromp taylor", "tromptaylor", "chinese", "chinese-ogs", "chinese_ogs",
    "chineseogs", "chinese-kgs", "chinese_kgs", "chinesekgs", "japanese", "korean", "aga", "bga", "french",
    "aga-button", "aga_button", "aga button", "agabutton", "new-zealand", "new_zealand", "new zealand",
    "newzealand", "nz", "stone-scoring", "stone_scoring", "stone scoring", "stonescoring", "ancient-area",
    "ancientarea", "ancient_area", "ancient area", "ancient-territory", "ancientterritory", "ancient_territory",
    "ancient territory", "goe", "ing",
]  # fmt: skip
BAD_RULE_NAMES = ["", "   ", "chinese2", "japan", "tromp-taylor-ish", "aga button!", "{", "{]", "[]", "null", "ko"]
OBJECT_VALUES: dict[str, list[Any]] = {
    "ko": ["SIMPLE", "POSITIONAL", "SITUATIONAL", "SPIGHT", "simple", "NONE", 1],
    "score": ["AREA", "TERRITORY", "area"],
    "scoring": ["AREA", "TERRITORY", "STONES", None],
    "tax": ["NONE", "SEKI", "ALL", "all"],
    "suicide": [True, False, "true", 1],
    "hasButton": [True, False, 0],
    "whiteHandicapBonus": ["0", "N", "N-1", "n", 0],
    "friendlyPassOk": [True, False, "false"],
    "komi": [7.5, 6.5, 0, -3.5, 7.25, 401, "7.5", True, 0.5],
    "koRule": ["SIMPLE"],
    "taxRule": ["SEKI"],
}


def _case_mix(rng: random.Random, text: str) -> str:
    roll = rng.random()
    if roll < 0.2:
        return text.upper()
    if roll < 0.4:
        return text.title()
    if roll < 0.5:
        return f" {text}\t"
    return text


def _legacy_rules(rng: random.Random) -> str:
    parts = {
        "ko": ["SIMPLE", "POSITIONAL", "SITUATIONAL", "SPIGHT"],
        "score": ["AREA", "TERRITORY"],
        "scoring": ["AREA", "TERRITORY"],
        "tax": ["NONE", "SEKI", "ALL"],
        "sui": ["0", "1"],
        "button": ["0", "1"],
        "whb": ["0", "N", "N-1"],
        "fpok": ["0", "1"],
        # half-integers only: KataGo v1.17.2 accepts `komi0.25` here but dies (a failed testAssert in
        # nninputs.cpp, exit 1) once a search scores a finished game with it
        "komi": ["7.5", "6", "0.5", "-3", "1e3", "x"],
    }
    keys = rng.sample(sorted(parts), rng.randint(1, 5))
    sep = rng.choice(["", "", " "])
    text = sep.join(key + rng.choice(parts[key]) for key in keys)
    if rng.random() < 0.1:
        text = text.lower()  # values are case-sensitive in this format
    if rng.random() < 0.05:
        text += rng.choice(["foo", "ko", "sui2"])
    return text


def _rules_object(rng: random.Random, valid: bool) -> dict[str, Any]:
    keys = ["ko", "score", "scoring", "tax", "suicide", "hasButton", "whiteHandicapBonus", "friendlyPassOk", "komi"]
    chosen = rng.sample(keys, rng.randint(0, 4))
    if not valid:
        chosen.append(rng.choice(sorted(OBJECT_VALUES)))
    out: dict[str, Any] = {}
    for key in chosen:
        values = OBJECT_VALUES[key]
        out[key] = values[rng.randrange(len(values))] if not valid else values[rng.randrange(min(3, len(values)))]
    return out


def rules_value(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.55:
        return _case_mix(rng, rng.choice(PRESETS))
    if roll < 0.7:
        return _legacy_rules(rng)
    if roll < 0.85:
        return _rules_object(rng, rng.random() < 0.6)
    if roll < 0.9:
        text = json.dumps(_rules_object(rng, rng.random() < 0.6), separators=(",", rng.choice([":", ": "])))
        if rng.random() < 0.1:  # KataGo's json::parse stops at a NUL byte: what follows is never read
            text += "\u0000" + rng.choice(["", "junk", "}"])
        return text if rng.random() < 0.8 else " " + text
    if roll < 0.96:
        return rng.choice(BAD_RULE_NAMES)
    return rng.choice([5, None, [], True, ["chinese"]])


def location_text(rng: random.Random, game: Game, x: int, y: int) -> str:
    """A way of writing a vertex: mostly plain, sometimes odd (case, spaces, padding, `(x,y)`, off-board)."""
    xs, ys = game.x_size, game.y_size
    roll = rng.random()
    if roll < 0.6:
        return vertex(x, y, ys)
    plain = vertex(x, y, ys)
    options = [
        plain.lower(),
        f" {plain} ",
        f"{plain[0]}0{plain[1:]}",
        f"{plain[0]}+{plain[1:]}",
        f"{plain[0]} {plain[1:]}",
        f"({x},{y})",
        f"( {x} , {y} )",
        f"({rng.randint(-1, xs)},{rng.randint(-1, ys)})",
        f"(0,{y}",
        "pss",
        "I1",
        "Z1",
        "AA1",
        f"A{ys + 1}",
        "A0",
        "A-1",
        "1A",
        f"{plain}.0",
        "",
        "A",
        f"{plain}\u00a0",
    ]
    return rng.choice(options)


def _turns(rng: random.Random, game: Game) -> Any:
    n = len(game.moves)
    roll = rng.random()
    if roll < 0.6:
        return sorted(rng.sample(range(n + 1), min(n + 1, rng.randint(1, 3))))
    options: list[Any] = [[], [0], [n], [n, 0, n], [n + 1], [-1], "0", [0.5], [True], {"0": 1}, [None], 3]
    return rng.choice(options)


def _allow_avoid(rng: random.Random, game: Game) -> Any:
    def entry() -> Any:
        locs = [
            location_text(rng, game, rng.randrange(game.x_size), rng.randrange(game.y_size))
            if rng.random() < 0.9
            else "pass"
            for _ in range(rng.randint(0, 4))
        ]
        locs = [loc for loc in locs if not loc.startswith("(")]  # out-of-array locations are KataGo UB here
        item: dict[str, Any] = {
            "player": rng.choice(["b", "w", "B", "white", "x", 1]),
            "moves": locs,
            "untilDepth": rng.choice([1, 2, 10, 0, 1.5, "1", 1000000001]),
        }
        if rng.random() < 0.1:
            del item[rng.choice(sorted(item))]
        return item if rng.random() < 0.95 else rng.choice(["b", 3, None, []])

    if rng.random() < 0.05:
        return rng.choice([{}, "A1", 3, None])
    return [entry() for _ in range(rng.choice([0, 1, 1, 1, 2, 2, 3]))]


OVERRIDES: dict[str, tuple[list[Any], list[Any]]] = {  # key: (valid values, wrong values)
    "maxVisits": ([1, 2, 3, "2", " 3 "], [0, -1, "abc", 2.5, True, None, [1], 2**50 + 1]),
    "wideRootNoise": ([0.0, 0.05, "0.02", 5], [-1, 5.01, "x", "1e400", False]),
    "rootPolicyTemperature": ([1.0, 1.2, "1e1"], [0, 101, "nan"]),
    "cpuctExploration": ([1.0, 0.9, "+1.5"], [-0.1, 11, "1,0"]),
    "cpuctUtilityStdevPrior": ([0.4], [0, 1e-9]),
    "playoutDoublingAdvantage": ([0.0, 0.5, -3], [3.5, "half"]),
    "playoutDoublingAdvantagePla": (["BLACK", "white", "b"], ["x", "", 1]),
    "numSearchThreads": ([1, 2], [0, 5000, "two"]),
    "graphSearchRepBound": ([11, 3], [2, 51]),
    "rootNumSymmetriesToSample": ([1, 8], [9, 0]),
    "nnPolicyTemperature": ([1.0, 0.5], [0.001, 6, "hot"]),
    "useNoisePruning": ([True, False, "TRUE", " false"], ["yes", 1, None]),
    "rootSymmetryPruning": ([True, False], ["no"]),
    "conservativePass": ([True, False], [0]),
    "alwaysComputePassAliveUnderSuicideRules": (["auto", "yes", "0", True], ["maybe"]),
    "fpuParentWeightByVisitedPolicy": ([False, True], ["x"]),
    "fpuParentWeight": ([0.5], [2]),
    "fpuParentWeightByVisitedPolicyPow": ([2.0], [6]),
    "reportAnalysisWinratesAs": (["BLACK", "white", "SIDETOMOVE", "b"], ["X", "blackk"]),
    "numBots": ([1], [2, 0]),
    "nodeTableShardsPowerOfTwo": ([16], [17, 7]),
    "useEvalCache": ([False], [True]),
    "evalCacheMinVisits": ([100], [50]),
    "humanSLProfile": (["", "_"], ["rank_9x", "x"]),
    "humanSLCpuctExploration": ([], [1.0]),
    "analysisPVLen": ([3], []),  # not a search parameter: an unknown key when not in the cfg
    "numAnalysisThreads": ([2], []),  # in the cfg: accepted silently, changes nothing
    "logDir": (["x"], []),
    "nnRandomize": ([False], []),
    "fooBar": ([1, "x"], []),
    "maxvisits": ([2], []),
}


def _override(rng: random.Random, game: Game) -> Any:
    if rng.random() < 0.05:
        return rng.choice([[], "maxVisits=2", 3, None])
    out = {}
    for key in rng.sample(sorted(OVERRIDES), rng.randint(0, 3)):
        valid, wrong = OVERRIDES[key]
        pool = valid if (valid and rng.random() < 0.7) or not wrong else wrong
        out[key] = rng.choice(pool)
    return out


def _values(valid: tuple[Any, ...], wrong: tuple[Any, ...]) -> Callable[[random.Random, Game], Any]:
    return lambda rng, game: rng.choice(valid if rng.random() < 0.65 else wrong)


FIELD_MAKERS: dict[str, Callable[[random.Random, Game], Any]] = {
    "initialPlayer": _values(("b", "w", "B", "W", "black", "White"), (" b", "x", "", 1, None)),
    "analyzeTurns": _turns,
    "priorities": lambda rng, game: rng.choice(
        [[rng.randint(-5, 5)], [1, 2], [], [2**62], [2**62 + 1], [-(2**62) - 1], "1", [1.5], [True]]
    ),
    "priority": _values((0, 5, -5, 2**62, -(2**62)), (2**62 + 1, 1.0, "1", True, None)),
    "maxVisits": _values((1, 2, 3, 4), (0, -1, 2**50 + 1, 1.0, "2", True, None)),
    "analysisPVLen": _values((1, 2, 5, 15, 1000), (0, 1001, 2.5, "3", False)),
    "rootFpuReductionMax": _values((0, 0.5, 2, 2.0), (-0.1, 2.5, "x", None)),
    "rootPolicyTemperature": _values((0.01, 1, 1.5, 100), (0.001, 101, "1", True)),
    "includeOwnership": _values((True, False), ("true", 1, None)),
    "includeOwnershipStdev": _values((True, False), (0,)),
    "includeMovesOwnership": _values((True, False), ("false",)),
    "includeMovesOwnershipStdev": _values((True, False), ([],)),
    "includePolicy": _values((True, False), (1,)),
    "includePVVisits": _values((True, False), ("yes",)),
    "includeNoResultValue": _values((True, False), (1,)),
    "reportDuringSearchEvery": _values((0.5, 1, 1000, 0.001), (0.0005, 0, 1e7, "1", None)),
    "firstReportDuringSearchAfter": _values((0.5, 2, 1000000.0), (0, -1, 1000001, "x")),
    "whiteHandicapBonus": _values(("0", "N", "N-1"), ("n", " N ", "2", "", 0, None)),
    "komi": _values((7.5, 6.5, 0, -0.5, 7, 400, -400, 1.0), (7.25, 400.5, -401, 1e3, "7.5", True, None, 0.1)),
    "allowMoves": _allow_avoid,
    "avoidMoves": _allow_avoid,
    "overrideSettings": _override,
}
UNKNOWN_FIELDS: dict[str, list[Any]] = {
    "foo": [1, "bar", None],
    "Moves": [[]],
    "komi ": [7.5],
    "maxvisits": [3],
    "includeownership": [True],
    "action": [5, None, [], {"a": 1}],
    "terminateId": ["x", 3],
    "turnNumbers": [[1], "x"],
    "\u00e9t\u00e9": [1],
}
