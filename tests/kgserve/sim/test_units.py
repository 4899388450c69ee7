"""Pure parts of the simulated engine: board replay (captures, ko, suicide), validation, formatting, cfg keys."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kgserve.katago_cfg import KNOWN_ANALYSIS_KEYS, is_known_key
from kgserve.katago_rules import Rules, parse_rules
from kgserve.sim.board import BLACK, EMPTY, WHITE, parse_loc
from kgserve.sim.cfgfile import parse_cfg_text
from kgserve.sim.queries import Defaults, Request, parse_query
from kgserve.sim.responses import F64, dumps
from tests.conftest import analysis_query

SECONDS_ERROR = "Must be number of seconds from 0.001 to 1000000.0"


def _query(moves: list[list[str]], size: int = 9, **extra: Any) -> tuple[list[str], list[Request]]:
    body = analysis_query("r", moves=moves, size=size, **extra)
    lines: list[str] = []
    requests = parse_query(body, Defaults(), lines.append)
    return lines, requests


def _error(lines: list[str]) -> str:
    assert len(lines) == 1
    return str(json.loads(lines[0])["error"])


def test_occupied_point_is_illegal() -> None:
    lines, requests = _query([["B", "E5"], ["W", "E5"]])
    assert _error(lines) == "Illegal move 1: E5" and requests == []


def test_capture_frees_the_point() -> None:
    # white A1 captured by black A2 + B1; then white may play A1 again only if it is not a ko retake
    lines, requests = _query([["W", "A1"], ["B", "A2"], ["W", "E5"], ["B", "B1"]])
    assert lines == [] and len(requests) == 1
    board = requests[0].board
    assert board.stones[parse_loc("A1", 9, 9)] == EMPTY  # type: ignore[index]
    assert board.stones[parse_loc("B1", 9, 9)] == BLACK  # type: ignore[index]
    assert requests[0].to_move == WHITE


def test_multi_stone_capture() -> None:
    moves = [["W", "A1"], ["B", "A3"], ["W", "A2"], ["B", "B2"], ["W", "E5"], ["B", "B1"]]
    lines, requests = _query(moves)
    assert lines == []
    stones = requests[0].board.stones
    assert stones[parse_loc("A1", 9, 9)] == EMPTY and stones[parse_loc("A2", 9, 9)] == EMPTY  # type: ignore[index]


KO_SHAPE = [["B", "D5"], ["W", "E5"], ["B", "E6"], ["W", "F6"], ["B", "E4"], ["W", "F4"], ["B", "A1"], ["W", "G5"]]


def test_simple_ko_retake_is_replayed_and_bans_the_recapture() -> None:
    # black F5 takes E5, white E5 retakes at once: KataGo's tolerant replay ignores ko (checked against v1.17.2),
    # and at the analysed position black may not take back at F5 (the policy has -1 there)
    moves = [*KO_SHAPE, ["B", "F5"], ["W", "E5"]]
    lines, requests = _query(moves)
    assert lines == [] and len(requests) == 1
    f5 = parse_loc("F5", 9, 9)
    assert requests[0].board.stones[f5] == EMPTY and f5 in requests[0].illegal  # type: ignore[index]


def test_ko_retake_after_a_threat_is_legal() -> None:
    moves = [*KO_SHAPE, ["B", "F5"], ["W", "A9"], ["B", "B9"], ["W", "E5"]]
    lines, requests = _query(moves)
    assert lines == [] and len(requests) == 1
    assert requests[0].board.stones[parse_loc("F5", 9, 9)] == EMPTY  # type: ignore[index]


def test_single_stone_suicide_is_an_illegal_move() -> None:
    # makeBoardMoveTolerant allows multi-stone suicide only: a lone stone with no liberty is an illegal move
    lines, requests = _query([["B", "A2"], ["W", "E5"], ["B", "B1"], ["W", "A1"]])
    assert _error(lines) == "Illegal move 3: A1" and requests == []


def test_multi_stone_suicide_is_replayed_and_removes_the_group() -> None:
    lines, requests = _query([["B", "A3"], ["W", "A1"], ["B", "B2"], ["W", "A2"], ["B", "C1"], ["W", "B1"]])
    assert lines == [] and len(requests) == 1
    stones = requests[0].board.stones
    assert all(stones[parse_loc(v, 9, 9)] == EMPTY for v in ("A1", "A2", "B1"))  # type: ignore[index]


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        ({"komi": 7.3}, "komi", "Must be a integer or half-integer from -400.0 to 400.0"),
        ({"rules": "foo"}, "rules", "Could not parse rules: foo"),
        ({"analyzeTurns": [0, 2]}, "analyzeTurns", "Invalid turn number: 2"),
        ({"analyzeTurns": "x"}, "analyzeTurns", "Must specify an array of integers indicating turns to analyze"),
        ({"maxVisits": 0}, "maxVisits", "Must be an integer from 1 to 2^50"),
        ({"initialPlayer": "x"}, "initialPlayer", 'Must be "b" or "w"'),
        ({"includePolicy": 1}, "includePolicy", "Must be a boolean"),
        ({"boardXSize": 1}, "boardXSize", "Must provide an integer from 2 to 19"),
        (
            {"reportDuringSearchEvery": 0},
            "reportDuringSearchEvery",
            "Must be number of seconds from 0.001 to 1000000.0",
        ),
    ],
)
def test_validation_errors(extra: dict[str, Any], field: str, message: str) -> None:
    lines, requests = _query([["B", "E5"]], **extra)
    assert requests == []
    assert json.loads(lines[0]) == {"error": message, "field": field, "id": "r"}


def test_player_and_location_errors() -> None:
    assert _error(_query([["X", "E5"]])[0]) == "Could not parse player: X"
    assert _error(_query([["B", "J10"]])[0]) == "Could not parse board location: J10"
    assert _error(_query([["B", "I5"]])[0]) == "Could not parse board location: I5"


def test_rules_names() -> None:
    for name in ("chinese", "japanese", "korean", "tromp-taylor", "aga", "new-zealand", "stone-scoring", "Chinese"):
        assert parse_rules(name) is not None, name
    assert parse_rules({"ko": "SIMPLE", "scoring": "AREA"}) == Rules(ko="SIMPLE", scoring="AREA")
    assert str(parse_rules("japanese")) == "koSIMPLEscoreTERRITORYtaxSEKIsui0komi6.5"
    assert str(parse_rules("koSPIGHTscoreTERRITORY")) == "koSPIGHTscoreTERRITORYtaxSEKIsui1komi6.5"
    assert parse_rules({}) == Rules()  # an empty object is Tromp-Taylor
    assert parse_rules("nonsense") is None and parse_rules({"bogus": 1}) is None


def test_analyze_turns_give_one_request_per_turn() -> None:
    lines, requests = _query([["B", "E5"], ["W", "C3"], ["B", "G7"]], analyzeTurns=[3, 0, 1])
    assert lines == [] and [r.turn for r in requests] == [0, 1, 3]
    assert [r.to_move for r in requests] == [BLACK, WHITE, WHITE]


def test_unused_field_warning_comes_before_illegal_move_error() -> None:
    lines, _ = _query([["B", "E5"], ["W", "E5"]], zzz=1)
    assert [next(iter(k for k in ("warning", "error") if k in json.loads(line))) for line in lines] == [
        "warning",
        "error",
    ]


def test_float_formatting_like_nlohmann() -> None:
    assert dumps({"b": 13.0, "a": 0.503043974}) == '{"a":0.503043974,"b":13.0}'
    assert dumps([9.26418652e-05, -1.0, F64(380.8499762846865)]) == "[9.26418652e-05,-1.0,380.8499762846865]"
    assert dumps({"s": "é", "t": True, "n": 3}) == '{"n":3,"s":"é","t":true}'


def test_cfg_keys() -> None:
    assert "nnMaxBatchSize" in KNOWN_ANALYSIS_KEYS and "numNNServerThreadsPerModel" in KNOWN_ANALYSIS_KEYS
    assert not is_known_key("nnMaxBatchSze") and is_known_key("cudaDeviceToUseThread3")
    assert parse_cfg_text("a = 1 # c\n# x\n\nb=two\n") == {"a": "1", "b": "two"}
