"""One line-break rule and KataGo's own cfg rules (issue 44 item 2, issue 45 item 4).

Writing: every value the project writes refuses each character KataGo or a Python reader splits a line on.
Reading: kgserve.katago.cfg parses as KataGo v1.17.2's ConfigParser does (cpp/core/config_parser.cpp), and
kgserve.katago.cfgcheck checks values with the getters KataGo reads them with (the forms below were each run
through the real KataGo v1.17.2; tests/katago/test_cfg_parse_real.py replays the line-break cases live).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kgbench.sweep.compose.render import RenderError, render_cfg
from kgserve.katago.cfg import KNOWN_ANALYSIS_KEYS, LINE_BREAKS, CfgParseError, cfg_text, is_known_key, parse_cfg_text
from kgserve.katago.cfg import read_cfg as read_cfg_file
from kgserve.katago.cfg_keys import RULES
from kgserve.katago.cfgcheck import cfg_problems, rule_for, value_problem_for

# every character str.splitlines breaks on, found by trying them all (not copied from the docs)
SPLITLINES = frozenset(chr(i) for i in range(sys.maxunicode + 1) if len(f"a{chr(i)}b".splitlines()) > 1)


def test_line_breaks_are_every_character_any_reader_splits_on() -> None:
    assert SPLITLINES | {"\n"} == LINE_BREAKS
    assert {"\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"} < LINE_BREAKS


@pytest.mark.parametrize("char", sorted(LINE_BREAKS), ids=lambda c: f"U+{ord(c):04X}")
def test_each_line_break_is_refused_on_write_and_read_as_katago_reads_it(char: str, tmp_path: Path) -> None:
    value = f"/data/a{char}maxVisits = 10"
    with pytest.raises(ValueError, match=f"line break \\(U\\+{ord(char):04X}\\)"):
        cfg_text({"homeDataDir": value})
    with pytest.raises(RenderError, match="homeDataDir"):
        render_cfg({"maxVisits": 100}, home_data_dir=value)
    with pytest.raises(RenderError, match="logDir"):
        render_cfg({"logDir": value})
    # KataGo's getline splits on `\n` only: any other break stays inside the value, no extra key appears
    text = f"homeDataDir = {value}\n"
    expected = (
        {"homeDataDir": "/data/a", "maxVisits": "10"}
        if char == "\n"
        else {"homeDataDir": f"/data/a{char}maxVisits = 10"}
    )
    assert parse_cfg_text(text) == expected
    path = tmp_path / "x.cfg"
    path.write_bytes(text.encode())
    assert read_cfg_file(path) == expected


def test_a_header_line_with_a_break_is_refused() -> None:
    with pytest.raises(ValueError, match="header"):
        cfg_text({"maxVisits": 1}, ["run\u2028maxVisits = 9"])


@pytest.mark.parametrize(
    ("value", "why"),
    [("", "empty"), (" x", "whitespace"), ("x\t", "whitespace"), ('"x"', "quoted"), ("a#b", "comment")],
)
def test_values_katago_would_not_read_back_as_written(value: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        cfg_text({"logDir": value})


def test_a_key_katago_cannot_parse_is_refused() -> None:
    with pytest.raises(ValueError, match="ASCII letters"):
        cfg_text({"max Visits": 1})


def test_katago_line_rules() -> None:
    text = (
        "  # comment\n"
        "\n"
        "a = 1 # trailing comment\r\n"  # CR is KataGo whitespace: trimmed at a line's end
        "b=two\n"
        'c = "x # y \\" z"   # quoted: `#` kept, `\\"` is a quote\n'
        "d\t=\t spaced out \x0b\n"  # VT and FF are KataGo whitespace too
        "e = trailing\x85\n"  # NEL is not: it stays in the value
    )
    assert parse_cfg_text(text) == {
        "a": "1",
        "b": "two",
        "c": 'x # y " z',
        "d": "spaced out",
        "e": "trailing\x85",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a = 1\na = 2\n", "Key 'a' + was specified multiple times"),
        ("justakey\n", "Could not parse key value pair, line 1"),
        ("a =\n", "Could not parse key value pair"),
        ('a = ""\n', "Could not parse key value pair"),
        ("= 5\n", "Could not parse key value pair"),
        ("a b\n", "Could not parse key value pair"),
        ('a = "open\n', "Could not parse key value pair"),
        ('a = "x" y\n', "Could not parse key value pair"),
        ("a.b = 1\n", "Could not parse key value pair"),
        ("ok = 1\n\n@define x\n", "Unsupported @ directive '@define', line 3"),
        ("@inc\n", "Unsupported @ directive"),
        ("@include = \n", "without value"),
    ],
)
def test_what_katago_refuses(text: str, message: str) -> None:
    with pytest.raises(CfgParseError, match=message.replace("+", r"\+")):
        parse_cfg_text(text)


def test_include_follows_katago(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "more.cfg").write_text("maxVisits = 7\nlogDir = logs\n")
    main = tmp_path / "main.cfg"
    main.write_text("maxVisits = 100\n@include sub/more.cfg # comment\nnumAnalysisThreads = 2\n")
    # a key set again by an included file overrides (keysOverrideFromIncludes)
    assert read_cfg_file(main) == {"maxVisits": "7", "logDir": "logs", "numAnalysisThreads": "2"}
    main.write_text("@include sub/more.cfg\n@include 'sub/more.cfg'\n")
    with pytest.raises(CfgParseError, match="multiple inclusion"):
        read_cfg_file(main)
    main.write_text(f"@include {tmp_path}/sub/more.cfg\n")
    with pytest.raises(CfgParseError, match="Absolute paths"):
        read_cfg_file(main)


# (key, value, accepted): each one run through the real KataGo v1.17.2 (start-up refused or not)
KATAGO_VERDICTS = [
    ("numAnalysisThreads", "+4", True),
    ("numAnalysisThreads", "04", True),
    ("numAnalysisThreads", "4.0", False),
    ("numAnalysisThreads", "0x4", False),
    ("numAnalysisThreads", "4e0", False),
    ("numAnalysisThreads", "-0", False),
    ("numAnalysisThreads", "0", False),
    ("cpuctExploration", ".5", True),
    ("cpuctExploration", "5.", True),
    ("cpuctExploration", "1E+0", True),
    ("cpuctExploration", "+1", True),
    ("cpuctExploration", "inf", False),
    ("cpuctExploration", "nan", False),
    ("cpuctExploration", "0x1p0", False),
    ("cpuctExploration", "1e", False),
    ("cpuctExploration", "1.5f", False),
    ("cpuctExploration", "1,5", False),
    ("logToStderr", "TRUE", True),
    ("logToStderr", "1", False),
    ("logToStderr", "yes", False),
    ("eigenUseFP16", "AUTO", True),
    ("eigenUseFP16", "2", False),
    ("maxVisits", "+100", True),
    ("maxVisits", "1e2", False),
    ("maxVisits", "abc", False),
    ("reportAnalysisWinratesAs", "sidetomove", True),
    ("reportAnalysisWinratesAs", "Black", True),
    ("reportAnalysisWinratesAs", "x", False),
]


@pytest.mark.parametrize(("key", "value", "accepted"), KATAGO_VERDICTS)
def test_values_as_katago_judges_them(key: str, value: str, accepted: bool) -> None:
    problem = value_problem_for(key, value)
    assert (problem is None) == accepted, problem


def test_ranges_from_the_source() -> None:
    assert RULES["nnMaxBatchSize"] == ("Int", 1, 65536)
    assert RULES["numAnalysisThreads"] == ("Int", 1, 16384)
    assert RULES["maxVisits"] == ("Int64", 1, 1 << 50)
    assert "out of KataGo's range 1 to 65536" in (value_problem_for("nnMaxBatchSize", "65537") or "")
    assert value_problem_for("nnMaxBatchSize", "abc") == "could not parse 'abc' as int"
    assert value_problem_for("numSearchThreadsPerAnalysisThread", "0")  # the alias has numSearchThreads' rule
    assert rule_for("cudaDeviceToUseThread3") == rule_for("cudaDeviceToUse") == ("Int", 0, 1023)
    assert rule_for("trtUseFP16-0") == ("Enabled", None, None) and rule_for("nnRandSeed1") == ("String", None, None)
    assert rule_for("avoidSgf2PatternUtility3") == ("Double", -3.0, 3.0)


def test_the_generated_table_and_the_key_list_agree() -> None:
    """Every key the analysis engine reads has a rule from the source (or is free text), and every rule's key the
    table found is one KataGo reads in some command: the hand list and the generated table were made apart."""
    without_rule = {key for key in KNOWN_ANALYSIS_KEYS if rule_for(key) is None}
    assert without_rule == set()
    assert all(isinstance(getter, str) for getter, _, _ in RULES.values())
    assert is_known_key("cudaDeviceToUseThread3") and rule_for("cudaDeviceToUseThread3") is not None


def test_cfg_problems_name_each_key() -> None:
    good = {"numAnalysisThreads": "4", "numSearchThreadsPerAnalysisThread": "1", "maxVisits": "100"}
    assert cfg_problems(good) == []
    bad = {**good, "nnMaxBatchSze": "8", "nnMaxBatchSize": "abc", "numAnalysisThreads": "0"}
    problems = cfg_problems(bad)
    assert any("'nnMaxBatchSze'" in p and "did you mean 'nnMaxBatchSize'" in p for p in problems)
    assert any("'nnMaxBatchSize'" in p and "could not parse 'abc' as int" in p for p in problems)
    assert any("'numAnalysisThreads'" in p and "range 1 to 16384" in p for p in problems)
    assert len(problems) == 3
    assert cfg_problems({**good, "nnMaxBatchSze": "8"}, allow_unknown=["nnMaxBatchSze"]) == []
    assert any("missing" in p for p in cfg_problems({}))
    assert any("both" in p for p in cfg_problems({**good, "numSearchThreads": "2"}))
    assert any("log target" in p for p in cfg_problems({**good, "logDir": "a", "logFile": "b"}))
