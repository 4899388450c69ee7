"""Field values at the edges of what KataGo's JSON library and casts hold, for the `numbers` and `human` categories.

`numbers`: integers around 2^62, 2^63 and 2^64 (nlohmann keeps int64 and uint64, anything wider becomes a double)
and doubles around 10^15 (where nlohmann's dump() turns to an exponent) in the integer fields (`priority` reads
a uint64 as a wrapped int64, `priorities` casts doubles, a double out of int64 range giving INT64_MIN),
in `komi`, rules objects and `overrideSettings` values (KataGo prints them back in its error texts), in unknown
fields, and echoed whole by a `clear_cache` action.

`human`: `humanSLProfile` in `overrideSettings`, every form SGFMetadata::getProfile knows and some it does not,
alone or with other keys; the test net has no human-SL input, so a valid profile is an error naming the net.
"""

from __future__ import annotations

import random
from typing import Any

from kgserve.katago._nlohmann import nlohmann_int64

__all__ = ["human_settings", "number_echo", "number_fields"]

BIG_INTS = [
    2**31, 2**32, 2**32 + 1, 2**62, 2**62 + 1, -(2**62), -(2**62) - 1, 2**63 - 1, 2**63, 2**63 + 5, 2**64 - 1,
    2**64 - 5, 2**64, 2**64 + 9, -(2**63), -(2**63) - 1, 10**20, -(10**20), 10**30,
]  # fmt: skip
EDGE_FLOATS = [
    1e15, 1.5e15, -1.234567890123456e15, 999999999999999.9, 1e16, 1e19, -1e19, 4.0e18, 4.7e18, -4.7e18, 9.3e18,
    -1e30, 1.5, -2.9, 0.0, -0.0, 1e-5, 0.0001, 5e-324, 1.7976931348623157e308,
]  # fmt: skip
NUMBERS = BIG_INTS + EDGE_FLOATS
# for maxVisits: none that KataGo would search with (2^31 visits would outlast the run)
NOT_VISITS = [n for n in NUMBERS if not (type(n) is int and 1 <= nlohmann_int64(n) <= 2**50)]
PROFILES_VALID = [
    "rank_9d", "rank_1d", "rank_1k", "rank_20k", "rank_3d_5k", "rank_20k_9d", "preaz_5k", "preaz_2d_1k",
    "proyear_1800", "proyear_2000", "proyear_2023", "proyear_ 2001", "proyear_+2002", "proyear_02003",
]  # fmt: skip
PROFILES_UNSET = ["_", '""']  # an empty string deletes the key instead
PROFILES_WRONG = [
    "rank_21k", "rank_0d", "rank_10d", "rank_3d_", "rank_3d_5k_1k", "Rank_3d", "rank_3D", "rank3d", "preaz_",
    "proyear_1799", "proyear_2024", "proyear_x", "proyear_2000.5", "proyear_", "x", " rank_3d",
]  # fmt: skip


def _number(rng: random.Random) -> Any:
    return rng.choice(NUMBERS)


def number_fields(rng: random.Random, body: dict[str, Any], turns: int) -> None:
    """Put one to three edge numbers into `body` (a valid query over a game of `turns` moves)."""
    for _ in range(rng.randint(1, 3)):
        field = rng.choice(
            ["priority", "priorities", "priorities", "boardXSize", "maxVisits", "analyzeTurns", "analysisPVLen",
             "komi", "rules", "overrideSettings", "unknown", "untilDepth"]
        )  # fmt: skip
        if field == "priorities":
            count = rng.randint(1, 2)
            body["analyzeTurns"] = [rng.randint(0, turns) for _ in range(count)]
            body["priorities"] = [_number(rng) if rng.random() < 0.8 else rng.randint(-3, 3) for _ in range(count)]
            body.pop("priority", None)
        elif field == "analyzeTurns":
            body["analyzeTurns"] = [rng.choice([2**32, 2**32 + min(1, turns), 2**64, -(2**63), 2**63, 1e19, 0])]
            body.pop("priorities", None)
        elif field == "rules":
            body["rules"] = {"komi": _number(rng)} if rng.random() < 0.7 else {"ko": "SIMPLE", "x": _number(rng)}
        elif field == "overrideSettings":
            key = rng.choice(["maxVisits", "cpuctExploration", "numSearchThreads", "fooBar", "wideRootNoise"])
            value = _number(rng) if rng.random() < 0.8 else [_number(rng), {"b": _number(rng), "a": 1}]
            value = rng.choice(NOT_VISITS) if key == "maxVisits" and type(value) is int else value
            body["overrideSettings"] = {key: value}
        elif field == "unknown":
            body["bigNumber"] = _number(rng)
        elif field == "untilDepth":
            entry = {"player": "b", "moves": ["pass"], "untilDepth": rng.choice(BIG_INTS)}
            body["avoidMoves"] = [entry]
            body.pop("allowMoves", None)
        elif field == "priority":
            body["priority"] = _number(rng)
            body.pop("priorities", None)
        else:
            body[field] = rng.choice(NOT_VISITS) if field == "maxVisits" else _number(rng)


def number_echo(rng: random.Random, case_id: str) -> dict[str, Any]:
    """A `clear_cache` action: KataGo answers with the request itself, every number as nlohmann prints it."""
    values: list[Any] = rng.sample(NUMBERS, rng.randint(1, 6))
    return {"id": case_id, "action": "clear_cache", "values": values, "nested": {"b": _number(rng), "a": [values]}}


def human_settings(rng: random.Random) -> dict[str, Any]:
    """`overrideSettings` with a humanSLProfile: valid (an error naming the net), unset, or unknown."""
    roll = rng.random()
    pool = PROFILES_VALID if roll < 0.5 else PROFILES_WRONG if roll < 0.85 else PROFILES_UNSET
    profile: Any = rng.choice(pool)
    if rng.random() < 0.05:
        profile = rng.choice([5, True, None, ["rank_3d"]])
    settings: dict[str, Any] = {"humanSLProfile": profile}
    if rng.random() < 0.4:  # unknown keys: KataGo warns about them before it refuses the profile
        settings[rng.choice(["fooBar", "humanSLprofile", "analysisPVLen"])] = 1
    if rng.random() < 0.3:
        settings[rng.choice(["maxVisits", "cpuctExploration"])] = rng.choice([2, 1.1, -1, "x"])
    if rng.random() < 0.1:
        settings["humanSLCpuctExploration"] = 1.0
    return settings
