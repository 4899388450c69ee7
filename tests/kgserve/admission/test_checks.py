"""kgserve.admission.checks on issue 27's classes: the floor on reportDuringSearchEvery (KataGo's own error text,
kgserve's floor), and the engine's side of a bounded terminate (each turn of a query terminated once)."""

from __future__ import annotations

import json

import pytest

from kgserve.admission.checks import check_query
from kgserve.katago.protocol import Query, Rejected, analysed_turns, classify_line
from kgserve.settings import LimitsSettings


def query(**fields: object) -> Query:
    body = {"id": "r", "moves": [["B", "D4"]], "maxVisits": 10, **fields}
    item = classify_line(json.dumps(body).encode(), defer_moves=True)
    assert isinstance(item, Query)
    return item


@pytest.mark.parametrize("every", [0.001, 0.05, 0, -1, 0.0999])
def test_partial_results_more_often_than_the_floor_get_katagos_error(every: float) -> None:
    refused = check_query(query(reportDuringSearchEvery=every), LimitsSettings(min_report_interval_s=0.1), None)
    assert isinstance(refused, Rejected) and refused.caller_id == "r"
    assert json.loads(refused.error_line) == {
        "error": "Must be number of seconds from 0.1 to 1000000.0",  # KataGo's text, kgserve's floor
        "field": "reportDuringSearchEvery",
        "id": "r",
    }


@pytest.mark.parametrize("every", [0.1, 0.25, 5, 1e7, "0.001", True, None])
def test_the_floor_lets_through_what_it_does_not_refuse(every: object) -> None:
    # at or over the floor, or a value KataGo refuses itself (its own error line, from the engine)
    checked = check_query(query(reportDuringSearchEvery=every), LimitsSettings(min_report_interval_s=0.1), None)
    assert not isinstance(checked, Rejected)


def test_analysed_turns_as_katago_matches_a_terminates_turn_numbers() -> None:
    assert analysed_turns(query().body) == {1}  # the turn after the last move
    assert analysed_turns(query(analyzeTurns=[0, 1.9, True, 1e10]).body) == {0, 1, -(2**31)}
    assert analysed_turns(query(analyzeTurns="x").body) == frozenset()
    assert analysed_turns(query(moves="x").body) == frozenset()
