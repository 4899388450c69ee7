"""A legacy rules string whose komi is not a half-integer (issue 12 follow-up): KataGo v1.17.2 accepts
`"rules":"scoreAREAkomi0.25"` and exits on a failed assert (nninputs.cpp:84) once a search scores a finished
game, so kgserve refuses such a query with an error line for it (kgserve.admission.checks.check_rules_komi).

The plain check, and end to end against `python -m kgserve --backend sim`; tests/katago/test_rules_komi.py runs
the end-to-end checks against the real engine and shows it survives.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from kgserve.admission.checks import MAX_KOMI_RULES_CHARS, check_rules_komi
from kgserve.katago.protocol import Query, Rejected, classify_line
from tests.helpers.hostile_checks import (
    check_non_half_integer_legacy_komi_gets_an_error_line,
    check_other_queries_of_the_request_are_analysed,
    line,
)

# One pass on 2x2 at 50 visits: the search soon scores a finished game (the real engine's crash repro).


def _query(rules: str, extra: str = "") -> Query:
    item = classify_line(line(rules, extra))
    assert isinstance(item, Query)
    return item


@pytest.mark.parametrize(
    ("rules", "extra", "refused"),
    [
        ('"scoreAREAkomi0.25"', "", True),
        ('"komi0.3"', "", True),
        ('" koSIMPLE komi -7.25 "', "", True),  # whitespace and a sign, as KataGo's legacy parser takes them
        ('"komi7.5komi0.25"', "", True),  # the last komi wins
        ('"komi0.25komi7.5"', "", False),
        ('"scoreAREAkomi0.25"', ',"komi":7.5', False),  # a top-level komi replaces it (KataGo checks that one)
        ('"komi0.5000000001"', "", False),  # 0.5 as a float
        ('"komi1000"', "", False),  # out of the user range but a half-integer: KataGo takes it and survives
        ('"komi0.25 junk"', "", False),  # KataGo's own "Could not parse rules" error
        ('"KOMI0.25"', "", False),  # likewise: the legacy form is case-sensitive
        ('"{\\"komi\\":0.25}"', "", False),  # KataGo checks a JSON string's komi itself
        ('{"scoring":"AREA","komi":0.25}', "", False),  # and a rules object's
        ('"chinese"', "", False),
    ],
)
def test_check_rules_komi(rules: str, extra: str, refused: bool) -> None:
    result = check_rules_komi(_query(rules, extra))
    if not refused:
        assert result is None
        return
    assert isinstance(result, Rejected)
    error = json.loads(result.error_line)
    assert error["id"] == "k" and error["field"] == "rules"
    assert "half-integer" in error["error"] and "crashes" in error["error"]


def test_long_rules_string_with_komi_is_refused_unparsed() -> None:
    rules = "sui1" * (MAX_KOMI_RULES_CHARS // 4) + "komi7.5"
    result = check_rules_komi(_query(json.dumps(rules)))
    assert isinstance(result, Rejected)
    assert f"limited to {MAX_KOMI_RULES_CHARS} characters" in json.loads(result.error_line)["error"]
    assert check_rules_komi(_query(json.dumps("sui1" * 100 + " "))) is None  # no komi: not looked at


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, config_writer: Any, kgserve_process: Any) -> Iterator[Any]:
    process = kgserve_process(config_writer(tmp_path_factory.mktemp("kgserve")))
    process.wait_listening()
    process.wait_ready()
    yield process
    process.stop()


def test_non_half_integer_legacy_komi_gets_an_error_line(server: Any) -> None:
    check_non_half_integer_legacy_komi_gets_an_error_line(server)


def test_other_queries_of_the_request_are_analysed(server: Any) -> None:
    check_other_queries_of_the_request_are_analysed(server)
