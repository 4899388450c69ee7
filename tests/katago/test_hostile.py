"""Issue 12's hostile-but-valid queries with the real KataGo behind `python -m kgserve` (backend eigen): an
escaped id, a BOM, analyzeTurns as KataGo converts it, the visits cap through overrideSettings and a
non-string action. The checks are tests/kgserve/http/hostile/test_hostile_queries.py's, run against the real engine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.hostile_checks import (
    check_analyze_turns_follow_katago_conversion,
    check_bom_before_a_line_is_analysed,
    check_escaped_id_gets_its_analysis_and_200,
    check_non_string_action_is_analysed,
    check_out_of_range_turns_end_with_katago_error,
    check_override_settings_cannot_bypass_the_visits_cap,
)
from tests.katago.conftest import RealKatago, start_kgserve, tier_config

pytestmark = pytest.mark.katago


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, real_katago: RealKatago) -> Iterator[Any]:
    config = tier_config(tmp_path_factory.mktemp("kgserve-katago"), real_katago, limits={"max_visits": 200_000})
    process = start_kgserve(config)
    yield process
    process.stop()


@pytest.mark.parametrize("raw_id", [r"a\"b", r"a\u0022b", r"\\\""])
def test_escaped_id_gets_its_analysis_and_200(server: Any, raw_id: str) -> None:
    check_escaped_id_gets_its_analysis_and_200(server, raw_id)


def test_bom_before_a_line_is_analysed(server: Any) -> None:
    check_bom_before_a_line_is_analysed(server)


@pytest.mark.parametrize(
    ("turns", "analysed"), [("[0.0,1.9,1.2]", [0, 1]), ("[false,true]", [0, 1]), ("[4294967296,4294967298]", [0, 2])]
)
def test_analyze_turns_follow_katago_conversion(server: Any, turns: str, analysed: list[int]) -> None:
    check_analyze_turns_follow_katago_conversion(server, turns, analysed)


def test_out_of_range_turns_end_with_katago_error(server: Any) -> None:
    check_out_of_range_turns_end_with_katago_error(server)


def test_override_settings_cannot_bypass_the_visits_cap(server: Any) -> None:
    check_override_settings_cannot_bypass_the_visits_cap(server)


@pytest.mark.parametrize("action", ["null", "5"])
def test_non_string_action_is_analysed(server: Any, action: str) -> None:
    check_non_string_action_is_analysed(server, action)
