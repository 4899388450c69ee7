"""The request line kgserve sends to the engine: the client's bytes with the internal id appended."""

from __future__ import annotations

import json

from kgserve.admission.checks import CheckedQuery, check_query
from kgserve.katago.protocol import Query, classify_line, engine_line
from kgserve.settings import LimitsSettings


def _query(line: bytes) -> Query:
    query = classify_line(line)
    assert isinstance(query, Query)
    return query


def test_the_clients_bytes_go_to_the_engine_with_the_internal_id_last() -> None:
    line = b'{"id": "a b", "komi": 7.50, "moves": [["B","Q16"]], "rules": "japanese", "x": 1E2}'
    sent = engine_line(_query(line), "kgq41")
    assert sent == line[:-1] + b',"id":"kgq41"}\n'  # nothing re-encoded: 7.50 and 1E2 stay as written
    assert json.loads(sent)["id"] == "kgq41"  # the last of duplicate keys wins (nlohmann keeps the last too)


def test_bom_and_surrounding_whitespace_are_not_sent() -> None:
    sent = engine_line(_query(b'\xef\xbb\xbf {"id":"x","moves":[]}  '), "kgq1")
    assert sent == b'{"id":"x","moves":[],"id":"kgq1"}\n'


def test_a_pretty_printed_query_is_sent_as_one_compact_line() -> None:
    query = _query(b'{\n  "id": "p",\n  "moves": []\n}')
    assert query.raw is None
    assert engine_line(query, "kgq2") == b'{"id":"kgq2","moves":[]}\n'


def test_a_clamped_query_is_sent_with_the_cap() -> None:
    limits = LimitsSettings(max_visits=100, visits_over_cap="clamp")
    checked = check_query(_query(b'{"id":"c","maxVisits":900,"moves":[]}'), limits, None)
    assert isinstance(checked, CheckedQuery) and checked.clamped
    sent = engine_line(checked.query, "kgq3")
    assert json.loads(sent) == {"id": "kgq3", "maxVisits": 100, "moves": []}
    assert sent.count(b'"id"') == 1
