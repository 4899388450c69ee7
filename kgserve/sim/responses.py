"""Fake but plausible analysis responses with KataGo's keys, shapes and number formatting.

Numbers are deterministic for (KGSERVE_SIM_SEED, position, visits). Serialisation copies nlohmann's `dump()`:
compact, keys sorted, UTF-8 kept, floats rounded to 9 significant digits and printed in their
shortest form (as in KataGo's output: 0.503043974, 0.2668778, 13.0, 9.26418652e-05); values marked `F64` are
doubles printed in full (rootInfo weight, e.g. 380.8499762846865).
"""

from __future__ import annotations

import json
import math
import random
import zlib
from dataclasses import dataclass
from typing import Any

from kgserve.sim.board import BLACK, EMPTY, PASS, WHITE, loc_to_str
from kgserve.sim.queries import Request

__all__ = ["F64", "dumps", "no_results", "render_analysis"]


class F64(float):
    """A double in KataGo's output (printed with up to 17 significant digits)."""


def _float_text(value: float) -> str:
    if isinstance(value, F64):
        return repr(float(value))
    return repr(float(f"{value:.9g}"))


_KEYS: dict[str, str] = {}


def _key(key: str) -> str:
    text = _KEYS.get(key)
    if text is None:
        text = json.dumps(key, ensure_ascii=False) + ":"
        if len(_KEYS) < 256:
            _KEYS[key] = text
    return text


def _dump(obj: Any, out: list[str]) -> None:
    if isinstance(obj, dict):
        out.append("{")
        first = True
        for key in sorted(obj):
            if not first:
                out.append(",")
            first = False
            out.append(_key(key))
            _dump(obj[key], out)
        out.append("}")
    elif isinstance(obj, list):
        if obj and all(type(x) is float for x in obj):  # ownership, policy: the bulk of a big response
            out.append("[" + ",".join([repr(float(f"{x:.9g}")) for x in obj]) + "]")
            return
        out.append("[")
        for i, item in enumerate(obj):
            if i:
                out.append(",")
            _dump(item, out)
        out.append("]")
    elif isinstance(obj, str) and obj.isalnum() and obj.isascii():
        out.append('"' + obj + '"')
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif obj is None:
        out.append("null")
    elif isinstance(obj, int):
        out.append(str(obj))
    elif isinstance(obj, float):
        out.append(_float_text(obj))
    else:
        out.append(json.dumps(obj, ensure_ascii=False))


def dumps(obj: Any) -> str:
    out: list[str] = []
    _dump(obj, out)
    return "".join(out)


def no_results(req: Request) -> str:
    return dumps({"id": req.id, "isDuringSearch": False, "noResults": True, "turnNumber": req.turn})


def _seed_for(seed: int, req: Request) -> int:
    return zlib.crc32(req.cache_key) ^ (seed * 0x9E3779B1)


@dataclass(frozen=True, slots=True)
class _Scene:
    """What every line of one rendering shares: the request, its empty points, whose side the numbers take
    (`sign`: +1 for Black's view) and the score scale of its board size."""

    req: Request
    empties: list[int]
    sign: float
    score_scale: float

    def winrate_of(self, lead: float) -> float:
        return 1.0 / (1.0 + math.exp(-lead / (self.score_scale / 4.0)))


def render_analysis(req: Request, visits: int, during: bool, seed: int, perspective: str) -> str:
    """One analysis line for `req` after `visits` root visits (>= 1)."""
    visits = max(1, visits)
    board = req.board
    base = random.Random(_seed_for(seed, req))
    noise = random.Random(_seed_for(seed, req) + visits * 7919)
    to_move = req.to_move
    blacks, whites = board.stones.count(BLACK), board.stones.count(WHITE)
    lead_black = (blacks - whites) * 0.9 - req.komi + 6.5 - (0.9 if to_move == WHITE else 0.0) + base.gauss(0.0, 2.5)
    sign = 1.0 if (perspective == "BLACK" or (perspective == "SIDETOMOVE" and to_move == BLACK)) else -1.0
    if perspective == "WHITE":
        sign = -1.0
    area = board.x_size * board.y_size
    scene = _Scene(req, board.empties(), sign, 30.0 * math.sqrt(area / 361.0))
    settle = 1.0 / math.sqrt(visits)
    root_lead = sign * (lead_black + noise.gauss(0.0, 0.3) * settle)
    candidates = _candidates(req, base, scene.empties)
    children = visits - 1
    count = min(len(candidates), children, max(1, int(1.2 * math.sqrt(visits)) + 1))
    chosen = candidates[:count]
    weights = [base.expovariate(1.0) ** 2 + 0.05 for _ in chosen]
    total_w = sum(weights) or 1.0
    priors = [0.85 * w / total_w for w in weights]
    alloc = _allocate(children, priors)
    order = sorted(range(count), key=lambda i: (-alloc[i], -priors[i]))
    move_infos = [
        _move_info(scene, chosen[i], alloc[i], rank, priors[i], root_lead, noise)
        for rank, i in enumerate(order)
        if alloc[i] > 0
    ]
    result: dict[str, Any] = {
        "id": req.id,
        "isDuringSearch": during,
        "moveInfos": move_infos,
        "rootInfo": _root_info(scene, visits, root_lead, base),
        "turnNumber": req.turn,
    }
    if req.flags["includeOwnership"]:
        result["ownership"] = _ownership(req, base, sign)
    if req.flags["includeOwnershipStdev"]:
        result["ownershipStdev"] = [abs(base.gauss(0.2, 0.1)) for _ in range(area)]
    if req.flags["includePolicy"]:
        result["policy"] = _policy(req, chosen, priors, base)
    return dumps(result)


def _move_info(
    scene: _Scene, loc: int, v: int, rank: int, prior: float, root_lead: float, noise: random.Random
) -> dict[str, Any]:
    """One entry of moveInfos: a candidate move `loc` that got `v` (> 0) of the root's visits."""
    req, score_scale = scene.req, scene.score_scale
    xs, ys = req.board.x_size, req.board.y_size
    area = xs * ys
    lead = root_lead + noise.gauss(0.0, 1.5) * (1.0 + 3.0 / math.sqrt(v))
    wr = scene.winrate_of(lead)
    util = (2.0 * wr - 1.0) + 0.05 * lead / score_scale
    info: dict[str, Any] = {
        "edgeVisits": v,
        "edgeWeight": float(v),
        "lcb": wr - 0.08 / math.sqrt(v),
        "move": _name(loc, xs, ys),
        "order": rank,
        "playSelectionValue": float(v),
        "prior": prior,
        "pv": [],
        "scoreLead": lead,
        "scoreMean": lead,
        "scoreSelfplay": lead * 1.05 + noise.gauss(0.0, 0.2),
        "scoreStdev": score_scale + noise.gauss(0.0, 0.5),
        "utility": util,
        "utilityLcb": util - 0.3 / math.sqrt(v),
        "visits": v,
        "weight": float(v),
        "winrate": wr,
    }
    pv, pv_visits = _pv(loc, v, req.pv_len, scene.empties, noise, xs, ys)
    info["pv"] = pv
    if req.flags["includePVVisits"]:
        info["pvVisits"] = pv_visits
        info["pvEdgeVisits"] = list(pv_visits)
    if req.flags["includeMovesOwnership"]:
        info["ownership"] = _ownership(req, noise, scene.sign)
    if req.flags["includeMovesOwnershipStdev"]:
        info["ownershipStdev"] = [abs(noise.gauss(0.2, 0.1)) for _ in range(area)]
    if req.flags["includeNoResultValue"]:
        info["noResultValue"] = noise.uniform(0.0, 1e-4)
    return info


def _root_info(scene: _Scene, visits: int, root_lead: float, base: random.Random) -> dict[str, Any]:
    """rootInfo: the position's own numbers after `visits` visits."""
    board, to_move, score_scale = scene.req.board, scene.req.to_move, scene.score_scale
    root_wr = scene.winrate_of(root_lead)
    raw_lead = root_lead + base.gauss(0.0, 0.4)
    return {
        "currentPlayer": "B" if to_move == BLACK else "W",
        "rawLead": raw_lead,
        "rawNoResultProb": base.uniform(1e-6, 3e-4),
        "rawScoreSelfplay": raw_lead * 1.02,
        "rawScoreSelfplayStdev": score_scale * 1.02,
        "rawStScoreError": -1.0,
        "rawStWrError": -0.5,
        "rawVarTimeLeft": -1.0,
        "rawWinrate": scene.winrate_of(raw_lead),
        "scoreLead": root_lead,
        "scoreSelfplay": root_lead * 1.05,
        "scoreStdev": score_scale,
        "symHash": board.hash_hex(to_move, b"sym"),
        "thisHash": board.hash_hex(to_move),
        "utility": (2.0 * root_wr - 1.0) + 0.05 * root_lead / score_scale,
        "visits": visits,
        "weight": F64(visits),
        "winrate": root_wr,
    }


def _name(loc: int, xs: int, ys: int) -> str:
    return loc_to_str(loc, xs, ys)


def _candidates(req: Request, rng: random.Random, empties: list[int]) -> list[int]:
    moves = [*(loc for loc in empties if loc not in req.illegal), PASS]
    if req.allowed is not None:
        moves = [m for m in moves if m in req.allowed]
    elif req.avoided:
        moves = [m for m in moves if m not in req.avoided]
    rng.shuffle(moves)
    return moves


def _allocate(total: int, priors: list[float]) -> list[int]:
    if not priors or total <= 0:
        return [0] * len(priors)
    shares = [p**1.5 for p in priors]
    s = sum(shares)
    alloc = [max(1, int(total * x / s)) for x in shares]
    while sum(alloc) > total:
        i = max(range(len(alloc)), key=lambda k: alloc[k])
        alloc[i] -= 1
    best = max(range(len(alloc)), key=lambda k: priors[k])
    alloc[best] += total - sum(alloc)
    return alloc


def _pv(
    first: int, v: int, pv_len: int, empties: list[int], rng: random.Random, xs: int, ys: int
) -> tuple[list[str], list[int]]:
    locs, counts = [first], [v]
    remaining = v
    while len(locs) < pv_len and len(locs) < len(empties):
        remaining = int(remaining * rng.uniform(0.35, 0.75))
        if remaining < 1:
            break
        loc = empties[rng.randrange(len(empties))]
        if loc not in locs:
            locs.append(loc)
            counts.append(remaining)
    return [loc_to_str(loc, xs, ys) for loc in locs], counts


def _ownership(req: Request, rng: random.Random, sign: float) -> list[float]:
    out = []
    for color in req.board.stones:
        if color == EMPTY:
            value = rng.uniform(-0.6, 0.6)
        else:
            value = (0.93 if color == BLACK else -0.93) + rng.uniform(-0.06, 0.06)
        out.append(round(sign * value, 6))
    return out


def _policy(req: Request, chosen: list[int], priors: list[float], rng: random.Random) -> list[float]:
    stones = req.board.stones
    policy = [-1.0 if loc in req.illegal else rng.uniform(1e-6, 4e-5) for loc in range(len(stones))]
    policy.append(rng.uniform(1e-7, 1e-5))
    for loc, prior in zip(chosen, priors, strict=True):
        policy[len(stones) if loc == PASS else loc] = prior
    return policy
