"""Hostile but valid queries (issue 12, items 1-4 and 8): kgserve must do what KataGo does with them.

End to end against `python -m kgserve --backend sim` (the sim follows KataGo's conversions), plus the
plain functions the fixes live in (protocol.locate_id, protocol.query_visits, limits.check_query).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from kgserve.admission.checks import check_query
from kgserve.katago.protocol import Query, Rejected, classify_line, locate_id, restore_id
from kgserve.settings import LimitsSettings
from tests.helpers.hostile_checks import (
    check_analyze_turns_follow_katago_conversion,
    check_bom_before_a_line_is_analysed,
    check_escaped_id_gets_its_analysis_and_200,
    check_non_string_action_is_analysed,
    check_out_of_range_turns_end_with_katago_error,
    check_override_settings_cannot_bypass_the_visits_cap,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, config_writer: Any, kgserve_process: Any) -> Iterator[Any]:
    config = config_writer(tmp_path_factory.mktemp("kgserve"), limits={"max_visits": 200_000})
    process = kgserve_process(config)
    process.wait_listening()
    process.wait_ready()
    yield process
    process.stop()


# -- item 1: an id holding an escaped quote or backslash ----------------------------------------------------
@pytest.mark.parametrize("raw_id", [r"a\"b", r"a\\b", r"a\u0022b", r"\\\"", r"x\\"])
def test_escaped_id_gets_its_analysis_and_200(server: Any, raw_id: str) -> None:
    check_escaped_id_gets_its_analysis_and_200(server, raw_id)


def test_locate_id_skips_escaped_quotes() -> None:
    engine_line = b'{"id":"kgq7","isDuringSearch":false,"turnNumber":2}'
    span = locate_id(engine_line)
    assert span is not None
    restored = restore_id(engine_line, span, json.dumps('a"b\\').encode())
    assert restored == b'{"id":"a\\"b\\\\","isDuringSearch":false,"turnNumber":2}'
    again = locate_id(restored)
    assert again is not None and restored[again[1] :].startswith(b'","isDuringSearch":false')


# -- item 2: a UTF-8 byte order mark before a line ------------------------------------------------------------
def test_bom_before_a_line_is_analysed(server: Any) -> None:
    check_bom_before_a_line_is_analysed(server)


# -- item 3: analyzeTurns as KataGo converts it -------------------------------------------------------------
@pytest.mark.parametrize(
    ("turns", "analysed"),
    [
        ("[0.0,1.9,1.2]", [0, 1]),
        ("[false,true]", [0, 1]),
        ("[4294967296,4294967298]", [0, 2]),
        ("[-0.5,2.0,2]", [0, 2]),
    ],
)
def test_analyze_turns_follow_katago_conversion(server: Any, turns: str, analysed: list[int]) -> None:
    check_analyze_turns_follow_katago_conversion(server, turns, analysed)


def test_out_of_range_turns_end_with_katago_error(server: Any) -> None:
    check_out_of_range_turns_end_with_katago_error(server)


# -- item 4: every per-query way to more visits meets the cap -----------------------------------------------
def test_override_settings_cannot_bypass_the_visits_cap(server: Any) -> None:
    check_override_settings_cannot_bypass_the_visits_cap(server)


def _query(text: str) -> Query:
    item = classify_line(text.encode())
    assert isinstance(item, Query)
    return item


@pytest.mark.parametrize(
    ("extra", "allowed"),
    [
        (',"overrideSettings":{"maxVisits":300000}', False),
        (',"overrideSettings":{"maxVisits":"300000"}', False),
        (',"overrideSettings":{"maxVisits":" +300000 "}', False),
        (',"overrideSettings":{"maxVisits":""}', False),  # deletes the bound: unbounded search
        (',"overrideSettings":{"maxVisits":300000},"maxVisits":100', True),  # the top-level value wins
        (',"overrideSettings":{"maxVisits":"3e5"}', True),  # KataGo cannot parse it: an error, no search
        (',"overrideSettings":{"maxVisits":100}', True),
        (',"maxVisits":200000', True),
        (',"maxVisits":200001', False),
        ("", True),  # the cfg's maxVisits (500 here)
    ],
)
def test_check_query_counts_the_visits_katago_will_search(extra: str, allowed: bool) -> None:
    base = '{"id":"v","moves":[],"rules":"chinese"' + extra + "}"
    checked = check_query(_query(base), LimitsSettings(max_visits=200_000), 500)
    assert isinstance(checked, Rejected) != allowed


def test_a_query_without_max_visits_counts_with_the_cfg() -> None:
    query = _query('{"id":"v","moves":[],"rules":"chinese"}')
    assert isinstance(check_query(query, LimitsSettings(max_visits=400), 500), Rejected)
    assert isinstance(check_query(query, LimitsSettings(max_visits=400), None), Rejected)  # no cfg bound
    assert not isinstance(check_query(query, LimitsSettings(max_visits=500), 500), Rejected)
    clamped = check_query(query, LimitsSettings(max_visits=400, visits_over_cap="clamp"), 500)
    assert not isinstance(clamped, Rejected) and clamped.query.body["maxVisits"] == 400


# -- item 8: a non-string action is no action ----------------------------------------------------------------
@pytest.mark.parametrize("action", ["null", "5", "[]", '{"x":1}'])
def test_non_string_action_is_analysed(server: Any, action: str) -> None:
    check_non_string_action_is_analysed(server, action)
