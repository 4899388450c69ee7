"""classify_line(defer_moves=True), kgserve's HTTP path: a plain `moves` array is checked but not decoded, and
every line is classified exactly as the full decode classifies it (same Query or the same error line)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from kgserve.admission.checks import CheckedQuery, check_query
from kgserve.admission.priority import apply_class
from kgserve.katago.protocol import DeferredJson, Query, Rejected, classify_line, encode_query, engine_line
from kgserve.settings import LimitsSettings

MOVES = b'[["B","Q16"],["W","D4"],["b","pass"],["W","A19"]]'
PLAIN = b'{"id":"p","rules":"japanese","komi":7.5,"boardXSize":19,"boardYSize":19,"moves":%s,"maxVisits":3}' % MOVES

LINES = [
    PLAIN,
    PLAIN.replace(b'"moves"', b'"moves" '),  # spaced: decoded whole
    PLAIN.replace(b'"id":"p"', b'"id":"p\\\\q"'),  # a backslash: decoded whole
    PLAIN.replace(b'"id":"p"', b'"id":"\\u00e9"'),
    PLAIN.replace(b'"Q16"', b'"Q 16"'),  # a move with another character: decoded whole
    PLAIN.replace(b'"Q16"', b'"Q\xc3\xa916"'),
    PLAIN.replace(b"]]", b"]]]", 1),  # not JSON
    PLAIN.replace(b'"maxVisits":3}', b'"maxVisits":3'),  # not JSON, cut short
    PLAIN.replace(b'"rules"', b'"rules":1,"x":{"moves":[["B","C3"]]},"r"'),  # a second "moves", nested
    b'{"id":"n","x":{"moves":[["B","C3"]]}}',  # the only moves nested
    b'[{"id":"a","moves":[["B","C3"]]}]',  # valid JSON, not an object: the error line shows the value
    b'{"id":"e","moves":[]}',
    b'{"moves":[["B","C3"]]}',  # no id
    b'{"id":"q","action":"query_version","moves":[["B","C3"]]}',
    b'{"id":"t","moves":[["B","C3"],["W","D4"]],"analyzeTurns":[0,1,1,2.5]}',
    b'{"id":"u","moves":[["B","C3"]],"moves2":[["",""]]}',
    b'\xef\xbb\xbf {"id":"bom","moves":[["B","C3"]]}  ',
    b'{"id":"x","moves":[["B","C3"],["W","D4"] ]}',
    b'{"id":"y","moves":[["B","C3"]] , "komi":6.5}',
    b'{"id":"z","moves":[["B","C3"],["W"]]}',
    b'{"id":"z2","moves":[["B","C3","D"]]}',
    b'{"id":"s","moves":[["B","C3"]],"initialStones":[["W","D4"]]}',
    b'{"id":"s2","moves":[["B","C3"]],"x":[1,[2]]}',
    b'{"id":"inf","moves":[["B","C3"]],"komi":1e999}',
    b'{"id":"\xff","moves":[["B","C3"]]}',  # not UTF-8
]


def _resolved(value: object) -> object:
    if isinstance(value, DeferredJson):
        return value.value()
    if isinstance(value, dict):
        return {key: _resolved(item) for key, item in value.items()}
    return value


@pytest.mark.parametrize("line", LINES)
def test_deferring_the_moves_classifies_every_line_as_the_full_decode(line: bytes) -> None:
    full, deferred = classify_line(line), classify_line(line, defer_moves=True)
    if isinstance(full, Rejected):
        assert deferred == full
        return
    assert isinstance(deferred, Query)
    assert replace(deferred, body=_resolved(deferred.body)) == full  # type: ignore[arg-type]
    assert engine_line(deferred, "kgq9") == engine_line(full, "kgq9")
    assert encode_query(deferred.body, "kgq9") == encode_query(full.body, "kgq9")


def test_plain_moves_are_left_undecoded_and_sent_as_written() -> None:
    query = classify_line(PLAIN, defer_moves=True)
    assert isinstance(query, Query)
    moves = query.body["moves"]
    assert isinstance(moves, DeferredJson) and moves.text == MOVES
    assert moves == json.loads(MOVES)
    assert engine_line(query, "kgq1") == PLAIN[:-1] + b',"id":"kgq1"}\n'


def test_a_reencoded_query_gets_its_moves_back() -> None:
    # a clamp or a priority class re-encodes the body: the deferred moves are decoded into it
    limits = LimitsSettings(max_visits=2, visits_over_cap="clamp")
    checked = check_query(classify_line(PLAIN, defer_moves=True), limits, None)  # type: ignore[arg-type]
    assert isinstance(checked, CheckedQuery) and checked.clamped
    sent = json.loads(engine_line(apply_class(checked.query, "interactive"), "kgq2"))
    assert sent["moves"] == json.loads(MOVES) and sent["maxVisits"] == 2 and sent["priority"] > 0
