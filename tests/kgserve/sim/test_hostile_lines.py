"""The sim answers hostile lines as a real KataGo v1.17.2 did (tests/differential/hostile_lines.py), and lives on.

Each class of issue 27: the last token read in parse errors, a NUL byte, integers past uint64, priorities out of
range, a humanSLProfile the net does not use (at start-up too), lines nested thousands of levels deep.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import SIM_MODEL
from tests.differential.hostile_lines import ANSWERS, LINES, answers_without_analysis
from tests.kgserve.sim.conftest import run_lines, write_cfg

ANALYSED = {"nul-ends-the-query", "rules-json-nul-ends", "priority-uint64-wraps", "priorities-4e18"}
ANALYSED |= {"deep-unknown-field", "still-answering"}


def test_hostile_lines_get_katagos_recorded_answers(tmp_path: Path) -> None:
    cfg = write_cfg(tmp_path)
    run = run_lines(cfg, LINES)  # bytes: NUL bytes, a BOM, invalid UTF-8 after a NUL
    assert run.returncode == 0, run.stderr[-2000:]
    expected = ANSWERS.read_text().splitlines()
    got = answers_without_analysis(run.stdout, str(SIM_MODEL), cfg)
    for index, (line, want) in enumerate(zip(got, expected, strict=False)):
        assert line == want, f"answer {index} differs"
    assert len(got) == len(expected)
    finals = {json.loads(line)["id"] for line in run.stdout if '"isDuringSearch":false' in line}
    assert finals == ANALYSED


def test_a_line_nested_deeper_than_python_recurses_is_answered_and_the_engine_goes_on(tmp_path: Path) -> None:
    deep = b"[" * 200_000 + b"]" * 200_000  # KataGo itself dies here (its recursive dump overflows the stack)
    query = b'{"id":"after","boardXSize":3,"boardYSize":3,"rules":"chinese","moves":[],"maxVisits":1}'
    run = run_lines(write_cfg(tmp_path), [deep, b'{"id":"q","x":' + deep + b"}", query])
    assert run.returncode == 0, run.stderr[-2000:]
    first, second, *rest = run.json_lines()
    assert str(first["error"]).startswith("Request line was valid json but was not an object, ignoring: [[[")
    assert second == {"error": "Must provide an integer from 2 to 19", "field": "boardXSize", "id": "q"}
    assert [line["id"] for line in rest] == ["after"]


def test_a_human_sl_profile_in_the_cfg_warns_at_start_up_and_fails_queries_with_overrides(tmp_path: Path) -> None:
    cfg = write_cfg(tmp_path, humanSLProfile="rank_3d")
    query = '{"id":"o","boardXSize":3,"boardYSize":3,"rules":"chinese","moves":[],"maxVisits":1,"overrideSettings":%s}'
    run = run_lines(cfg, [query % '{"maxVisits":1}', query.replace('"o"', '"plain"') % "{}"])
    assert run.returncode == 0, run.stderr
    warning = f"WARNING: humanSLProfile is specified as config param but model(s) don't use it: {SIM_MODEL}"
    # as KataGo: to the log (timestamped) and straight to stderr, before `Loaded config`
    assert f": {warning}\n{warning}\n" in run.stderr
    assert run.stderr.index(warning) < run.stderr.index("Loaded config")
    error, final = run.json_lines()
    assert error["error"] == f"Could not set settings: {warning}\n" and error["id"] == "o"
    assert final["id"] == "plain"


def test_an_unknown_human_sl_profile_in_the_cfg_aborts_start_up(tmp_path: Path) -> None:
    run = run_lines(write_cfg(tmp_path, humanSLProfile="bogus"), [])
    assert run.returncode == 134
    assert "terminate called after throwing an instance of 'StringError'" in run.stderr
    assert "what():  Unknown human SL network profile: bogus" in run.stderr
    assert "Started, ready" not in run.stderr
