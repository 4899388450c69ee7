"""Compare the answers of two engines to the same query, keeping to what does not depend on the search.

Compared, per query id:
- error and warning lines, and any other line that is no analysis (an action's answer): the same lines, byte for
  byte, in the same order;
- final analysis lines (`isDuringSearch: false`): the same turn numbers, one line each; per line the same
  top-level keys, `id`, `turnNumber`, `rootInfo` keys and value types, `rootInfo.currentPlayer` and
  `rootInfo.visits`; `ownership`/`ownershipStdev`/`policy` lengths; which `policy` entries are -1 (the
  illegal moves: occupied points, ko, suicide under the rules); the key set and value types of the
  `moveInfos` entries (`isSymmetryOf` aside), with per-move arrays of the board's length;
- on each side alone: `pv` no longer than the move plus `analysisPVLen` replies (KataGo's bound),
  `pvVisits`/`pvEdgeVisits` as long as `pv`, no `moveInfos` move on a point the policy marks illegal.

Not compared (they depend on the search or on the network): every number's value (winrates, scores, priors,
visits per move, ownership), `moveInfos` count, order and moves, `pv` contents and length, `isSymmetryOf`,
`thisHash`/`symHash` values (the sim's hashes are not Zobrist hashes), partial (`isDuringSearch: true`) lines,
which appear only when a search outlives `firstReportDuringSearchAfter`, and line order across queries.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

__all__ = ["differences", "group_by_id"]

SEARCH_DEPENDENT_MOVE_KEYS = frozenset({"isSymmetryOf"})


def group_by_id(lines: Iterable[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = defaultdict(list)
    for line in lines:
        try:
            value = json.loads(line)
        except ValueError:
            groups[""].append(line)
            continue
        groups[value.get("id", "") if isinstance(value, dict) else ""].append(line)
    return groups


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, list):
        return f"list[{','.join(sorted({_kind(v) for v in value}))}]"
    return type(value).__name__


def _notices(lines: list[str]) -> list[str]:
    """Error and warning lines, and answers that are no analysis (e.g. a `clear_cache` echo): compared as text."""
    return [line for line in lines if '"error":' in line or '"warning":' in line or '"isDuringSearch":' not in line]


def _finals(lines: list[str]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for line in lines:
        value = json.loads(line)
        if value.get("isDuringSearch") is False:
            out[int(value.get("turnNumber", -1))].append(value)
    return out


def _move_kinds(infos: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Per moveInfos key, the value kinds seen; an empty list (a pv cut at a game's end) matches any list."""
    kinds: dict[str, set[str]] = defaultdict(set)
    for info in infos:
        for key, value in info.items():
            if key in SEARCH_DEPENDENT_MOVE_KEYS:
                continue
            kinds.setdefault(key, set())
            if _kind(value) != "list[]":
                kinds[key].add(_kind(value))
    return dict(kinds)


def _self_checks(name: str, line: dict[str, Any], pv_len: int | None) -> list[str]:
    problems = []
    policy = line.get("policy")
    for info in line.get("moveInfos", []):
        pv = info.get("pv", [])
        if pv_len is not None and len(pv) > pv_len + 1:  # the move, then up to analysisPVLen replies
            problems.append(f"{name}: pv of {info.get('move')} longer than analysisPVLen {pv_len} + 1")
        for key in ("pvVisits", "pvEdgeVisits"):
            if key in info and len(info[key]) != len(pv):
                problems.append(f"{name}: {key} of {info.get('move')} not as long as its pv")
        if isinstance(policy, list) and info.get("move") != "pass":
            problems.extend(_illegal_move_check(name, line, info["move"], policy))
    return problems


def _illegal_move_check(name: str, line: dict[str, Any], move: str, policy: list[float]) -> list[str]:
    area = len(policy) - 1
    size = line.get("_size")
    if size is None or size[0] * size[1] != area:
        return []
    xs, ys = size
    col = "ABCDEFGHJKLMNOPQRST".find(move[0])
    index = (ys - int(move[1:])) * xs + col
    if 0 <= index < area and policy[index] == -1:
        return [f"{name}: moveInfos has {move}, an illegal move by its own policy"]
    return []


def _compare_final(real: dict[str, Any], sim: dict[str, Any]) -> list[str]:
    out = []
    if sorted(real) != sorted(sim):
        out.append(f"top-level keys: real {sorted(real)} sim {sorted(sim)}")
    ri, si = real.get("rootInfo", {}), sim.get("rootInfo", {})
    real_root = {k: _kind(v) for k, v in ri.items()}
    sim_root = {k: _kind(v) for k, v in si.items()}
    if real_root != sim_root:
        out.append(f"rootInfo keys/types: real {real_root} sim {sim_root}")
    for key in ("currentPlayer", "visits"):
        if ri.get(key) != si.get(key):
            out.append(f"rootInfo.{key}: real {ri.get(key)!r} sim {si.get(key)!r}")
    for key in ("ownership", "ownershipStdev", "policy"):
        if key in real and key in sim and len(real[key]) != len(sim[key]):
            out.append(f"{key} length: real {len(real[key])} sim {len(sim[key])}")
    if "policy" in real and "policy" in sim:
        real_mask = [i for i, p in enumerate(real["policy"]) if p == -1]
        sim_mask = [i for i, p in enumerate(sim["policy"]) if p == -1]
        if real_mask != sim_mask:
            out.append(f"policy -1 entries: real {real_mask} sim {sim_mask}")
    real_moves, sim_moves = _move_kinds(real.get("moveInfos", [])), _move_kinds(sim.get("moveInfos", []))
    if real_moves and sim_moves:
        if sorted(real_moves) != sorted(sim_moves):
            out.append(f"moveInfos keys: real {sorted(real_moves)} sim {sorted(sim_moves)}")
        for key in sorted(set(real_moves) & set(sim_moves)):
            if real_moves[key] and sim_moves[key] and real_moves[key] != sim_moves[key]:
                out.append(f"moveInfos {key} types: real {real_moves[key]} sim {sim_moves[key]}")
    for side, line in (("real", real), ("sim", sim)):
        for info in line.get("moveInfos", []):
            for key in ("ownership", "ownershipStdev"):
                if key in info and "ownership" in line and len(info[key]) != len(line["ownership"]):
                    out.append(f"{side}: moveInfos {key} length {len(info[key])}")
    return out


def differences(query: dict[str, Any] | None, real_lines: list[str], sim_lines: list[str]) -> list[str]:
    """What differs between the two engines' lines for one query (empty when they agree)."""
    out = []
    real_notices, sim_notices = _notices(real_lines), _notices(sim_lines)
    if real_notices != sim_notices:
        out.append(f"notices: real {real_notices} sim {sim_notices}")
    real_finals, sim_finals = _finals(real_lines), _finals(sim_lines)
    if {t: len(v) for t, v in real_finals.items()} != {t: len(v) for t, v in sim_finals.items()}:
        out.append(f"final turns: real {sorted(real_finals)} sim {sorted(sim_finals)}")
        return out
    pv_len = None
    size = None
    if isinstance(query, dict):
        value = query.get("analysisPVLen")
        pv_len = value if type(value) is int else None
        size = (query.get("boardXSize"), query.get("boardYSize"))
    for turn, reals in real_finals.items():
        real, sim = reals[0], sim_finals[turn][0]
        out.extend(f"turn {turn}: {d}" for d in _compare_final(real, sim))
        for name, line in (("real", real), ("sim", sim)):
            out.extend(f"turn {turn}: {p}" for p in _self_checks(name, {**line, "_size": size}, pv_len))
    return out
