"""Validation of one analysis query, in KataGo's order and with its texts (analysis.cpp, v1.17 request loop).

`parse_query(body, defaults)` returns the lines to print at once (errors, warnings) and the search requests,
one per analysed turn. The first error ends the query, as in KataGo.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kgserve.katago._nlohmann import nlohmann_int, nlohmann_int64
from kgserve.katago.priorities import PRIORITY_LIMIT
from kgserve.katago.protocol import INCLUDE_FIELDS, dump_compact
from kgserve.katago.rules import Rules, float32, is_int_or_half_int, parse_rules, supported_rules
from kgserve.sim.board import BLACK, EMPTY, PASS, WHITE, Board, loc_to_str, parse_loc, parse_player
from kgserve.sim.history import Replay
from kgserve.sim.overrides import OverrideError, apply_overrides, human_sl_unused

__all__ = ["Defaults", "Request", "Search", "error_for", "parse_query", "warning_for"]

BOARD_SIZE_ERROR = "Must provide an integer from 2 to 19"
MOVES_SHAPE_ERROR = 'Must be an array of pairs of the form: ["b" or "w", GTP board vertex]'
LOCS_ERROR = "Must be an array of GTP board vertices"
RULES_MISSING = (
    'Must specify rules string, such as "chinese" or "tromp-taylor", or a JSON object with detailed rules parameters.'
)
KOMI_ERROR = "Must be a integer or half-integer from -400.0 to 400.0"
UNUSED_FIELD_WARNING = (
    "Unexpected or unused field, do you have a typo? (set warnUnusedFields=false in the config to disable this warning)"
)
AVOID_SHAPE = "Must be a list of dicts with subfields 'player', 'moves', 'untilDepth'"
EXPECTED_KEYS = frozenset(
    {
        "id",
        "action",
        "terminateId",
        "turnNumbers",
        "moves",
        "initialStones",
        "initialPlayer",
        "rules",
        "komi",
        "whiteHandicapBonus",
        "boardXSize",
        "boardYSize",
        "analyzeTurns",
        "priorities",
        "priority",
        "maxVisits",
        "analysisPVLen",
        "rootFpuReductionMax",
        "rootPolicyTemperature",
        *INCLUDE_FIELDS,
        "reportDuringSearchEvery",
        "firstReportDuringSearchAfter",
        "allowMoves",
        "avoidMoves",
        "overrideSettings",
    }
)
_BOOL_FIELDS = (
    "includeMovesOwnership",
    "includeMovesOwnershipStdev",
    "includeOwnership",
    "includeOwnershipStdev",
    "includePolicy",
    "includePVVisits",
    "includeNoResultValue",
)


@dataclass(frozen=True)
class Defaults:
    max_visits: int = 1 << 50
    pv_len: int = 15
    warn_unused_fields: bool = True
    perspective_black: bool = False
    # the engine's cfg (aliases applied) and its path, against which overrideSettings are checked
    cfg_values: Mapping[str, str] = field(default_factory=lambda: {"numSearchThreads": "1"})
    cfg_name: str = "analysis.cfg"
    model: str = "model.bin.gz"  # the -model argument, as KataGo names the net in its texts


@dataclass
class Search:
    """What a query sets for its searches (analysis.cpp reads these fields after the position and the rules)."""

    max_visits: int
    pv_len: int
    flags: dict[str, bool]
    report_every: float | None
    first_report: float | None
    priority: int


@dataclass
class Request(Search):
    """One analysed turn: the query's search settings (its priority for this turn), the position, who plays."""

    id: str
    turn: int
    board: Board
    to_move: int
    rules: str
    komi: float
    allowed: frozenset[int] | None  # for the player to move
    avoided: frozenset[int]
    illegal: frozenset[int] = frozenset()  # points the player to move may not play
    seq: int = 0
    parent_key: bytes | None = None  # the position one move before (its cache_key), for the NN cache model

    @property
    def cache_key(self) -> bytes:
        return self.board.position_key(self.to_move, self.rules, self.komi)


def error_for(caller_id: str, field: str, message: str) -> str:
    return dump_compact({"error": message, "field": field, "id": caller_id})


def warning_for(caller_id: str, field: str, message: str) -> str:
    return dump_compact({"field": field, "id": caller_id, "warning": message})


class _Fail(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_num(v: Any) -> bool:
    return type(v) in (int, float)


def _get_int_list(value: Any, field: str, message: str, bits: int) -> list[int]:
    """nlohmann get<vector<int>> (bits 32: booleans count) or get<vector<int64_t>> (bits 64: numbers only), with
    C++'s casts: integers wrap, doubles truncate, doubles out of range give the type's minimum."""
    kinds = (int, float, bool) if bits == 32 else (int, float)
    if not isinstance(value, list) or not all(type(v) in kinds for v in value):
        raise _Fail(field, message)
    return [nlohmann_int(v) if bits == 32 else nlohmann_int64(v) for v in value]


def _integer(body: dict[str, Any], field: str, lo: int, hi: int, message: str) -> int:
    """parseInteger: an integer (int64 or uint64: is_number_integer), read as int64 (a uint64 wraps)."""
    value = body[field]
    if not _is_int(value) or not lo <= nlohmann_int64(value) <= hi:
        raise _Fail(field, message)
    return nlohmann_int64(value)


def _double(body: dict[str, Any], field: str, lo: float, hi: float, message: str) -> float:
    value = body[field]
    if not _is_num(value) or not (lo <= float(value) <= hi):
        raise _Fail(field, message)
    return float(value)


def _player(body: dict[str, Any], field: str) -> int:
    value = body[field]
    player = parse_player(value) if isinstance(value, str) else None
    if player is None:
        raise _Fail(field, 'Must be "b" or "w"')
    return player


def _moves(body: dict[str, Any], field: str, xs: int, ys: int, allow_pass: bool) -> list[tuple[int, int]]:
    value = body[field]
    if not isinstance(value, list):
        raise _Fail(field, MOVES_SHAPE_ERROR)
    out = []
    for elt in value:
        if not isinstance(elt, list) or len(elt) != 2 or not all(isinstance(s, str) for s in elt):
            raise _Fail(field, MOVES_SHAPE_ERROR)
        player = parse_player(elt[0])
        if player is None:
            raise _Fail(field, "Could not parse player: " + elt[0])
        loc = parse_loc(elt[1], xs, ys)
        if loc is None or (loc == PASS and not allow_pass):
            raise _Fail(field, "Could not parse board location: " + elt[1])
        out.append((player, loc))
    return out


def _locs(params: dict[str, Any], field: str, xs: int, ys: int) -> list[int]:
    value = params[field]
    if not isinstance(value, list):
        raise _Fail(field, LOCS_ERROR)
    out = []
    for elt in value:
        if not isinstance(elt, str):
            raise _Fail(field, LOCS_ERROR)
        loc = parse_loc(elt, xs, ys)
        if loc is None:
            raise _Fail(field, "Could not parse board location: " + elt)
        out.append(loc)
    return out


def parse_query(body: dict[str, Any], defaults: Defaults, emit: Callable[[str], None]) -> list[Request]:
    """Validate `body` (a JSON object with a string id and no string action); print lines via `emit`."""
    caller_id: str = body["id"]
    try:
        return _parse(body, defaults, emit, caller_id)
    except _Fail as fail:
        emit(error_for(caller_id, fail.field, fail.message))
        return []


def _parse(body: dict[str, Any], defaults: Defaults, emit: Callable[[str], None], caller_id: str) -> list[Request]:
    for key in ("boardXSize", "boardYSize"):
        if key not in body:
            raise _Fail(key, BOARD_SIZE_ERROR)
    xs = _integer(body, "boardXSize", 2, 19, BOARD_SIZE_ERROR)
    ys = _integer(body, "boardYSize", 2, 19, BOARD_SIZE_ERROR)
    placements = _moves(body, "initialStones", xs, ys, False) if "initialStones" in body else []
    if "moves" not in body:
        raise _Fail("moves", "Must specify an array of [player,location] pairs")
    history = _moves(body, "moves", xs, ys, True)
    initial_player = _player(body, "initialPlayer") if "initialPlayer" in body else EMPTY
    should, turns = _analyze_turns(body, len(history))
    priorities = _priorities(body, turns)
    rules = _rules(body)
    max_visits = _override_settings(body, defaults, emit, caller_id)
    search = _search(body, defaults, max_visits)
    allow_avoid = _allow_avoid(body, xs, ys)
    board = Board(xs, ys)
    for player, loc in placements:
        board.set_stone(loc, player)
    if initial_player == EMPTY:
        if history:
            initial_player = history[0][0]
        else:  # BoardHistory::numHandicapStonesOnBoard: only black stones, at least two of them
            blacks, whites = board.stones.count(BLACK), board.stones.count(WHITE)
            initial_player = WHITE if whites == 0 and blacks >= 2 else BLACK
    supported = supported_rules(rules)
    if supported != rules:
        emit(warning_for(caller_id, "rules", f"Rules {rules} not supported by neural net, using {supported} instead"))
        rules = supported
    if defaults.warn_unused_fields:
        for key in sorted(body):
            if key not in EXPECTED_KEYS:
                emit(warning_for(caller_id, key, UNUSED_FIELD_WARNING))
    replay = Replay(board, initial_player, rules)
    return _replay(caller_id, replay, history, should, priorities, search, allow_avoid)


def _analyze_turns(body: dict[str, Any], moves: int) -> tuple[list[bool], list[int]]:
    """Which turns to analyse (default: the last), and the `analyzeTurns` list as KataGo read it."""
    should = [False] * (moves + 1)
    if "analyzeTurns" not in body:
        should[-1] = True
        return should, []
    message = "Must specify an array of integers indicating turns to analyze"
    turns = _get_int_list(body["analyzeTurns"], "analyzeTurns", message, 32)
    for turn in turns:
        if turn < 0 or turn >= len(should):
            raise _Fail("analyzeTurns", f"Invalid turn number: {turn}")
        should[turn] = True
    return should, turns


def _priorities(body: dict[str, Any], turns: list[int]) -> dict[int, int]:
    if "priorities" not in body:
        return {}
    message = "Must specify an array of integers indicating priorities"
    values = _get_int_list(body["priorities"], "priorities", message, 64)
    if "analyzeTurns" not in body:
        raise _Fail("priorities", "Can only specify when also specifying analyzeTurns")
    if len(values) != len(turns):
        raise _Fail("priorities", "Must be of matching length to analyzeTurns")
    priorities: dict[int, int] = {}
    for turn, priority in zip(turns, values, strict=True):
        if abs(priority) > PRIORITY_LIMIT:
            raise _Fail("priorities", f"Invalid priority: {priority}")
        priorities[turn] = priority
    return priorities


def _rules(body: dict[str, Any]) -> Rules:
    """`rules` (a name, a legacy string or an object), then `komi` and `whiteHandicapBonus` over them."""
    if "rules" not in body or not isinstance(body["rules"], str | dict):
        raise _Fail("rules", RULES_MISSING)
    raw_rules = body["rules"]
    rules = parse_rules(raw_rules)
    if rules is None:
        shown = raw_rules if isinstance(raw_rules, str) else dump_compact(raw_rules)
        raise _Fail("rules", "Could not parse rules: " + shown)
    if "komi" in body:
        komi = float32(_double(body, "komi", -400.0, 400.0, KOMI_ERROR))
        if not is_int_or_half_int(komi):
            raise _Fail("komi", KOMI_ERROR)
        rules = replace(rules, komi=komi)
    if "whiteHandicapBonus" in body:
        bonus = body["whiteHandicapBonus"]
        if not isinstance(bonus, str):
            raise _Fail("whiteHandicapBonus", "Must be a string")
        if bonus not in ("0", "N-1", "N"):
            message = f"Rules::parseWhiteHandicapBonusRule: Invalid whiteHandicapBonus rule: {bonus}"
            raise _Fail("whiteHandicapBonus", message)
        rules = replace(rules, whb=bonus)
    return rules


def _override_settings(body: dict[str, Any], defaults: Defaults, emit: Callable[[str], None], caller_id: str) -> int:
    """Check `overrideSettings` against the engine's cfg; the search's maxVisits after them."""
    if "overrideSettings" not in body:
        return defaults.max_visits
    settings = body["overrideSettings"]
    if not isinstance(settings, dict):
        raise _Fail("overrideSettings", "Must be an object")
    try:
        overridden = apply_overrides(settings, defaults.cfg_values, defaults.cfg_name)
    except OverrideError as err:
        raise _Fail("overrideSettings", f"Could not set settings: {err}") from None
    if overridden.unknown:
        emit(warning_for(caller_id, "overrideSettings", "Unknown config params: " + ",".join(overridden.unknown)))
    if overridden.human_sl_profile:  # Setup::maybeWarnHumanSLParams, its text ending in endl
        raise _Fail("overrideSettings", f"Could not set settings: {human_sl_unused(defaults.model)}\n")
    return overridden.max_visits if overridden.max_visits is not None else defaults.max_visits


def _search(body: dict[str, Any], defaults: Defaults, max_visits: int) -> Search:
    if "maxVisits" in body:
        max_visits = _integer(body, "maxVisits", 1, 1 << 50, "Must be an integer from 1 to 2^50")
    pv_len = defaults.pv_len
    if "analysisPVLen" in body:
        pv_len = _integer(body, "analysisPVLen", 1, 1000, "Must be an integer from 1 to 1000")
    if "rootFpuReductionMax" in body:
        _double(body, "rootFpuReductionMax", 0.0, 2.0, "Must be a number from 0.0 to 2.0")
    if "rootPolicyTemperature" in body:
        _double(body, "rootPolicyTemperature", 0.01, 100.0, "Must be a number from 0.01 to 100.0")
    flags = dict.fromkeys(_BOOL_FIELDS, False)
    for key in _BOOL_FIELDS:
        if key in body:
            if type(body[key]) is not bool:
                raise _Fail(key, "Must be a boolean")
            flags[key] = body[key]
    report_every = first_report = None
    seconds = "Must be number of seconds from 0.001 to 1000000.0"
    if "reportDuringSearchEvery" in body:
        report_every = first_report = _double(body, "reportDuringSearchEvery", 0.001, 1e6, seconds)
    if "firstReportDuringSearchAfter" in body:
        first_report = _double(body, "firstReportDuringSearchAfter", 0.001, 1e6, seconds)
        report_every = report_every if report_every is not None else 1e30
    priority = 0
    if "priority" in body:
        if "priorities" in body:
            raise _Fail("priority", "Cannot specify both priority and priorities")
        message = "Must be a number between -2^62 and 2^62"
        priority = _integer(body, "priority", -PRIORITY_LIMIT, PRIORITY_LIMIT, message)
    return Search(max_visits, pv_len, flags, report_every, first_report, priority)


def _replay(
    caller_id: str,
    replay: Replay,
    history: list[tuple[int, int]],
    should: list[bool],
    priorities: dict[int, int],
    search: Search,
    allow_avoid: dict[int, tuple[frozenset[int] | None, frozenset[int]]],
) -> list[Request]:
    """Replay the moves; one search request per analysed turn. An illegal move ends the query."""
    board, rules = replay.board, replay.rules
    requests = []
    parent: bytes | None = None
    for turn in range(len(history) + 1):
        if should[turn]:
            to_move = replay.to_move
            allowed, avoided = allow_avoid.get(to_move, (None, frozenset()))
            settings = replace(search, priority=priorities.get(turn, search.priority))
            requests.append(
                Request(
                    **vars(settings),
                    id=caller_id,
                    turn=turn,
                    board=board.copy(),
                    to_move=to_move,
                    rules=str(rules),
                    komi=rules.komi,
                    allowed=allowed,
                    avoided=avoided,
                    illegal=replay.illegal_points(),
                    parent_key=parent,
                )
            )
        if turn == len(history):
            break
        if should[turn + 1]:  # the next analysed turn's parent: this position
            parent = board.position_key(replay.to_move, str(rules), rules.komi)
        player, loc = history[turn]
        if not replay.play(loc, player):
            raise _Fail("moves", f"Illegal move {turn}: {loc_to_str(loc, board.x_size, board.y_size)}")
    return requests


def _allow_avoid(body: dict[str, Any], xs: int, ys: int) -> dict[int, tuple[frozenset[int] | None, frozenset[int]]]:
    """allowMoves/avoidMoves per player: (allowed points or None, avoided points)."""
    has_allow, has_avoid = "allowMoves" in body, "avoidMoves" in body
    if not (has_allow or has_avoid):
        return {}
    if has_allow and has_avoid:
        raise _Fail("allowMoves", "Cannot specify both allowMoves and avoidMoves")
    field = "allowMoves" if has_allow else "avoidMoves"
    entries = body[field]
    if not isinstance(entries, list):
        raise _Fail(field, AVOID_SHAPE)
    if has_allow and len(entries) > 2:
        raise _Fail(field, "Currently allowMoves only allows at most one entry per player")
    out: dict[int, tuple[frozenset[int] | None, frozenset[int]]] = {}
    for params in entries:
        if not isinstance(params, dict) or not {"moves", "untilDepth", "player"} <= set(params):
            raise _Fail(field, AVOID_SHAPE)
        player = _player(params, "player")
        locs = frozenset(_locs(params, "moves", xs, ys))
        _integer(params, "untilDepth", 1, 1000000000, "Must be a positive integer")
        if has_allow:
            if player in out:
                raise _Fail(field, "Cannot specify allowMoves more than once for the same player")
            out[player] = (locs, frozenset())
        else:
            out[player] = (None, out.get(player, (None, frozenset()))[1] | locs)
    return out
