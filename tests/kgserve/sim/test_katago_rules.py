"""The sim's board, rules and overrideSettings as KataGo v1.17.2 answers them.

The expected texts and legal moves below were checked against the real engine (the same queries, its policy's
-1 entries; see docs/differential-testing.md): these tests keep the sim there when no real KataGo is at hand.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kgserve.katago_rules import parse_rules
from kgserve.sim.board import OFF_BOARD, PASS, loc_to_str, parse_loc, parse_player
from kgserve.sim.overrides import OverrideError, apply_overrides
from kgserve.sim.queries import Defaults, Request, parse_query

CFG = {"numSearchThreads": "1", "maxVisits": "2", "numAnalysisThreads": "4", "logDir": "logs"}


def _query(moves: list[list[str]], **extra: Any) -> tuple[list[dict[str, Any]], list[Request]]:
    body = {"id": "q", "moves": moves, "rules": "tromp-taylor", "boardXSize": 5, "boardYSize": 5, **extra}
    lines: list[str] = []
    requests = parse_query(body, Defaults(cfg_values=CFG, cfg_name="a.cfg"), lines.append)
    return [json.loads(line) for line in lines], requests


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A+1", "A1"),
        (" a 1 ", "A1"),
        ("PSS", "pass"),
        ("(0,-1)", "pass"),  # KataGo's padded array: that is the pass location
        ("(5,0)", "(-1,1)"),  # a wall (the padding before row 1): parses, and playing it is an illegal move
        ("(6,0)", "A4"),  # one past the wall wraps to the next row
    ],
)
def test_vertices_parse_as_katago_does(text: str, expected: str) -> None:
    loc = parse_loc(text, 5, 5)
    assert loc is not None and loc_to_str(loc, 5, 5) == expected


def test_unparsable_vertices_and_players() -> None:
    assert parse_loc("(-1,-1)", 5, 5) is None  # the null location
    assert parse_loc("A1\u00a0", 5, 5) is None  # not one of KataGo's whitespace characters
    assert parse_player(" b") is None and parse_player("BLACK") is not None
    assert parse_loc("(5,0)", 5, 5) == OFF_BOARD + 12 and parse_loc("pass", 5, 5) == PASS


def test_playing_a_wall_is_an_illegal_move() -> None:
    lines, requests = _query([["b", "(5,0)"]])
    assert lines == [{"error": "Illegal move 0: (-1,1)", "field": "moves", "id": "q"}] and requests == []


def test_initial_stones_capture_and_skip_single_stone_suicide() -> None:
    # white A1 is captured by black B1 placed after it; a white stone alone among black ones is not placed
    stones = [["w", "A1"], ["b", "A2"], ["b", "B1"], ["b", "D4"], ["b", "C5"], ["b", "E5"], ["w", "D5"]]
    lines, requests = _query([], initialStones=stones)
    board = requests[0].board
    assert lines == [] and board.stones[parse_loc("A1", 5, 5)] == 0  # type: ignore[index]
    assert board.stones[parse_loc("D5", 5, 5)] == 0  # type: ignore[index]


def test_two_passes_lift_the_ko_ban_but_not_positional_superko() -> None:
    stones = [["b", "B1"], ["b", "A2"], ["b", "B3"], ["w", "C1"], ["w", "B2"], ["w", "D2"], ["w", "C3"]]
    moves = [["b", "C2"], ["w", "pass"], ["b", "pass"]]  # black takes the ko, both pass: white to retake at B2
    b2 = parse_loc("B2", 5, 5)
    for rules, banned in (("tromp-taylor", True), ("aga", True), ("chinese", False)):
        _, requests = _query(moves, initialStones=stones, rules=rules, analyzeTurns=[1, 3])
        assert b2 in requests[0].illegal  # the simple ko ban right after the capture
        assert (b2 in requests[1].illegal) is banned, rules


def test_rules_warning_for_what_the_network_cannot_play() -> None:
    lines, _ = _query([], rules="koSPIGHTscoreTERRITORY", komi=7)
    warning = "Rules koSPIGHTscoreTERRITORYtaxSEKIsui1komi7 not supported by neural net, using "
    assert lines == [
        {"field": "rules", "id": "q", "warning": warning + "koSITUATIONALscoreTERRITORYtaxSEKIsui1komi7 instead"}
    ]


def test_rules_parse_as_katago_does() -> None:
    assert parse_rules("Ancient Territory") is not None and parse_rules(" ing ") is not None
    lines, _ = _query([], rules='{"ko":"SPIGHT","score":"TERRITORY","scoring":"AREA"}')  # keys applied sorted
    assert lines[0]["warning"].startswith("Rules koSPIGHTscoreAREAtaxNONEsui1komi7.5 not supported")
    assert parse_rules(" {}") is None  # a JSON string must start with "{"
    assert parse_rules({"ko": "simple"}) is None and parse_rules("kosimple") is None  # values are case-sensitive


def _override_error(settings: dict[str, Any]) -> str:
    with pytest.raises(OverrideError) as info:
        apply_overrides(settings, CFG, "a.cfg")
    return str(info.value)


def test_override_settings_errors_and_unknown_keys() -> None:
    where = " in config file a.cfg and/or command-line and query overrides"
    assert _override_error({"wideRootNoise": -1}) == "Key 'wideRootNoise' must be in the range 0 to 5" + where
    assert _override_error({"maxVisits": 2.5}) == "Could not parse '2.5' as int64_t for key 'maxVisits'" + where
    assert _override_error({"useEvalCache": True}) == "Cannot change useEvalCache after initialization"
    done = apply_overrides({"maxVisits": " 3 ", "logDir": "x", "nnRandomize": False, "fooBar": 1}, CFG, "a.cfg")
    assert done.max_visits == 3 and done.unknown == ["fooBar", "nnRandomize"]  # cfg keys pass silently


def test_override_error_line() -> None:
    lines, requests = _query([], overrideSettings={"numBots": 2})
    assert requests == [] and lines == [
        {
            "error": "Could not set settings: The config for this command cannot have numBots > 0",
            "field": "overrideSettings",
            "id": "q",
        }
    ]
