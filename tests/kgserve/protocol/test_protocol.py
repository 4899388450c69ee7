"""Request classification and byte-exact id restoring against the real KataGo transcripts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgserve.katago.protocol import (
    Query,
    Rejected,
    classify_line,
    encode_query,
    line_kind,
    locate_id,
    nlohmann_parse_error,
    restore_id,
    split_body,
)
from tests.conftest import REFERENCE

OUTPUT_FILES = sorted(REFERENCE.glob("samples/outputs/*.jsonl")) + sorted(REFERENCE.glob("protocol/*.out.jsonl"))
ERRORS_IN = (REFERENCE / "protocol" / "errors.in.jsonl").read_bytes().splitlines()
ERRORS_OUT = (REFERENCE / "protocol" / "errors.out.jsonl").read_bytes().splitlines()
# lines KataGo answers without an id, with the index of their reply in errors.out.jsonl
ID_LESS = {3: 3, 10: 10, 13: 13, 14: 14, 15: 15}


@pytest.mark.parametrize("path", OUTPUT_FILES, ids=lambda p: p.name)
def test_every_reference_line_survives_the_id_round_trip(path: Path) -> None:
    for original in path.read_bytes().splitlines():
        span = locate_id(original)
        if span is None:
            assert b'"id"' not in original
            continue
        caller_id = json.loads(original)["id"]
        as_engine_sent = original[: span[0]] + b"kg00000042" + original[span[1] :]
        engine_span = locate_id(as_engine_sent)
        assert engine_span is not None
        assert as_engine_sent[engine_span[0] : engine_span[1]] == b"kg00000042"
        restored = restore_id(as_engine_sent, engine_span, json.dumps(caller_id).encode())
        assert restored == original


@pytest.mark.parametrize("caller_id", ["plain", 'quote"back\\slash', "unicode-碁-\u00e9", "tab\tnl\n", "kg00000001"])
def test_restore_id_writes_the_id_as_nlohmann_would(caller_id: str) -> None:
    line = b'{"id":"kg7","isDuringSearch":false,"turnNumber":3}'
    span = locate_id(line)
    assert span is not None
    query = classify_line(json.dumps({"id": caller_id, "moves": []}).encode())
    assert isinstance(query, Query)
    restored = restore_id(line, span, query.caller_id_json)
    assert json.loads(restored) == {"id": caller_id, "isDuringSearch": False, "turnNumber": 3}
    assert restored.endswith(b',"isDuringSearch":false,"turnNumber":3}')


@pytest.mark.parametrize(("index", "reply_index"), sorted(ID_LESS.items()))
def test_id_less_errors_match_katago_byte_for_byte(index: int, reply_index: int) -> None:
    result = classify_line(ERRORS_IN[index])
    assert isinstance(result, Rejected)
    assert result.error_line == ERRORS_OUT[reply_index]


def test_actions_never_reach_the_engine() -> None:
    for line in (b'{"id":"v","action":"query_version"}', b'{"id":"t","action":"terminate_all"}'):
        result = classify_line(line)
        assert isinstance(result, Rejected)
        assert json.loads(result.error_line)["field"] == "action"


def test_analysis_queries_pass_with_their_turn_count_and_visits() -> None:
    result = classify_line(b'{"id":"g","moves":[],"analyzeTurns":[0,1,1,2],"maxVisits":50}')
    assert isinstance(result, Query)
    assert (result.caller_id, result.expected_finals, result.visits) == ("g", 3, 50)
    sent = encode_query(result.body, "kg1")
    assert sent.endswith(b"\n") and sent.count(b"\n") == 1
    assert json.loads(sent)["id"] == "kg1"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            b'{"id":"a"',
            "parse error at line 1, column 10: syntax error while parsing object - "
            "unexpected end of input; expected '}'",
        ),
        (b"[1,2", "syntax error while parsing array - unexpected end of input; expected ']'"),
        (b'{"id":"x","komi":1e400}', "[json.exception.out_of_range.406] number overflow parsing '1e400'"),
        # the lexer quotes every byte read since the last string or number began (a real KataGo's text)
        (
            b'{"id":"x","komi":NaN}',
            "column 18: syntax error while parsing value - invalid literal; last read: '\"komi\":N'",
        ),
        (b'{"id":"\\ud800"}', "surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF"),
        (b'{"id":"\xff"}', "invalid string: ill-formed UTF-8 byte"),
    ],
)
def test_lines_python_and_nlohmann_disagree_on_are_rejected_as_katago_would(line: bytes, expected: str) -> None:
    result = classify_line(line)
    assert isinstance(result, Rejected)
    message = json.loads(result.error_line)["error"]
    assert expected in message
    assert message.endswith(" - could not parse input line as json request: " + line.decode(errors="replace"))


def test_parse_error_text_of_the_transcript() -> None:
    expected = json.loads(ERRORS_OUT[10])["error"]
    assert nlohmann_parse_error("not json at all") == expected


def test_split_body_accepts_pretty_printed_and_json_lines() -> None:
    pretty = b'{\n  "id": "a",\n  "moves": []\n}\n'
    assert len(split_body(pretty)) == 1
    assert split_body(b'{"id":"a"}\n\n  {"id":"b"}\r\n') == [b'{"id":"a"}', b'{"id":"b"}']
    assert split_body(b"  \n ") == []


def test_line_kinds() -> None:
    final = b'{"id":"q","isDuringSearch":false,"turnNumber":1}'
    partial = b'{"id":"q","isDuringSearch":true,"turnNumber":1}'
    error = b'{"error":"Illegal move 1: Q4","field":"moves","id":"q"}'
    warning = b'{"field":"fooBar","id":"q","warning":"Unexpected or unused field"}'
    for line, kind in ((final, "final"), (partial, "partial"), (error, "error"), (warning, "warning")):
        span = locate_id(line)
        assert span is not None
        assert line_kind(line, span[1]) == kind
