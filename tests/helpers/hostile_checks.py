"""Hostile but valid queries (issue 12 and its komi follow-up), checked end to end against any engine behind
kgserve: the simulated one (tests/kgserve/http/hostile/test_hostile_queries.py, test_rules_komi.py) and a real KataGo
(tests/katago/test_hostile.py, test_rules_komi.py)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.helpers.http import post

Q = '"moves":[["B","C3"],["W","D4"]],"rules":"chinese","komi":7.5,"boardXSize":9,"boardYSize":9,"maxVisits":10'


def query(raw_id: str, extra: str = "") -> bytes:
    """A 9x9 query line; `raw_id` goes in as written (JSON escapes and all)."""
    return ('{"id":"' + raw_id + '",' + Q + extra + "}").encode()


def finals(response: httpx.Response) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in response.content.splitlines()]
    return [line for line in lines if line.get("isDuringSearch") is False]


def check_escaped_id_gets_its_analysis_and_200(server: Any, raw_id: str) -> None:
    body = query(raw_id, ',"reportDuringSearchEvery":0.1')
    response = post(server.url, body, **{"X-Request-ID": "escaped-id"})
    assert response.status_code == 200, response.text
    lines = [json.loads(line) for line in response.content.splitlines()]
    caller_id = json.loads('"' + raw_id + '"')
    assert lines and all(line["id"] == caller_id for line in lines)
    assert lines[-1]["isDuringSearch"] is False


def check_bom_before_a_line_is_analysed(server: Any) -> None:
    bom = b"\xef\xbb\xbf"
    alone = post(server.url, bom + query("bom"))
    assert alone.status_code == 200, alone.text
    assert [line["id"] for line in finals(alone)] == ["bom"]
    lines = query("first") + b"\n" + bom + query("second")
    both = post(server.url, lines)
    assert both.status_code == 200, both.text
    assert sorted(line["id"] for line in finals(both)) == ["first", "second"]


def check_analyze_turns_follow_katago_conversion(server: Any, turns: str, analysed: list[int]) -> None:
    response = post(server.url, query("t", ',"analyzeTurns":' + turns))
    assert response.status_code == 200, response.text
    assert sorted(line["turnNumber"] for line in finals(response)) == analysed


def check_out_of_range_turns_end_with_katago_error(server: Any) -> None:
    response = post(server.url, query("t", ',"analyzeTurns":[1e10]'))
    assert response.status_code == 400
    assert [json.loads(line) for line in response.content.splitlines()] == [
        {"error": "Invalid turn number: -2147483648", "field": "analyzeTurns", "id": "t"}
    ]


def check_override_settings_cannot_bypass_the_visits_cap(server: Any) -> None:
    body = query("big", ',"overrideSettings":{"maxVisits":300000}').replace(b',"maxVisits":10', b"")
    response = post(server.url, body, **{"X-Deadline-Ms": "3000"})
    assert response.status_code == 400, response.text[:300]
    (line,) = [json.loads(raw) for raw in response.content.splitlines()]
    assert line["id"] == "big" and line["field"] == "maxVisits" and "200000" in line["error"]


def check_non_string_action_is_analysed(server: Any, action: str) -> None:
    response = post(server.url, query("act", ',"action":' + action))
    assert response.status_code == 200, response.text
    assert [line["id"] for line in finals(response)] == ["act"]


SMALL = '"moves":[["B","pass"]],"boardXSize":2,"boardYSize":2,"maxVisits":50'


def line(rules: str, extra: str = "", query_id: str = "k") -> bytes:
    """A query line; `rules` is the JSON text of the rules value."""
    return ('{"id":"' + query_id + '","rules":' + rules + "," + SMALL + extra + "}").encode()


DEADLINE = {"X-Deadline-Ms": "30000"}


def check_non_half_integer_legacy_komi_gets_an_error_line(server: Any) -> None:
    response = post(server.url, line('"scoreAREAkomi0.25"'), **DEADLINE)
    assert response.status_code == 400, response.text[:300]
    (error,) = [json.loads(raw) for raw in response.content.splitlines()]
    assert error["id"] == "k" and error["field"] == "rules" and "half-integer" in error["error"]


def check_other_queries_of_the_request_are_analysed(server: Any) -> None:
    body = line('"scoreAREAkomi0.25"', query_id="bad") + b"\n" + line('"scoreAREAkomi0.5"', query_id="good")
    response = post(server.url, body, **DEADLINE)
    assert response.status_code == 200, response.text[:300]
    by_id = {item["id"]: item for item in (json.loads(raw) for raw in response.content.splitlines())}
    assert by_id["bad"]["field"] == "rules"
    assert by_id["good"]["isDuringSearch"] is False and by_id["good"]["moveInfos"]
