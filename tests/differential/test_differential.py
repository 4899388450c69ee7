"""The differential check in CI: 400 seeded generated queries answered alike by the sim and a real KataGo.

The long run (5,000 cases and more, a table per category) is `python -m tests.differential.run_long`; see
docs/differential-testing.md. Both need KGBENCH_KATAGO_BIN and KGBENCH_KATAGO_MODEL.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from tests.differential.compare import differences
from tests.differential.engines import katago_spec, run_lines, write_cfg
from tests.differential.generate import CATEGORIES, generate
from tests.differential.hostile_lines import ANSWERS, LINES, answers_without_analysis
from tests.differential.runner import run_differential

SEED, CASES = 20261122, 400
SKIP_REASON = "KGBENCH_KATAGO_BIN and KGBENCH_KATAGO_MODEL are not both set: no real KataGo to compare the sim with"


def test_generator_is_seeded_and_covers_every_category() -> None:
    first, again = generate(SEED, 300), generate(SEED, 300)
    assert first == again and generate(SEED + 1, 300) != first
    assert len({case.id for case in first}) == 300
    assert set(Counter(case.category for case in first)) == set(CATEGORIES)
    assert all(json.loads(case.line)["id"] == case.id for case in first if case.category != "lines")


def test_comparison_sees_a_changed_error_line_and_a_missing_key() -> None:
    # the check itself must be able to fail: a different error text, a missing rootInfo key, another -1 entry
    error = '{"error":"Illegal move 3: A1","field":"moves","id":"x"}'
    assert differences(None, [error], [error.replace("3", "4")])
    final = {"id": "x", "isDuringSearch": False, "turnNumber": 0, "moveInfos": [], "policy": [0.5, -1.0, 0.5]}
    final["rootInfo"] = {"currentPlayer": "B", "visits": 2, "winrate": 0.5}
    sim = {**final, "rootInfo": {"currentPlayer": "B", "visits": 2}}
    assert differences(None, [json.dumps(final)], [json.dumps(final)]) == []
    assert differences(None, [json.dumps(final)], [json.dumps(sim)])
    assert differences(None, [json.dumps(final)], [json.dumps({**final, "policy": [-1.0, -1.0, 0.5]})])
    # numbers may differ as long as the same entries are -1
    assert differences(None, [json.dumps(final)], [json.dumps({**final, "policy": [0.1, -1.0, 0.9]})]) == []


@pytest.mark.katago
@pytest.mark.slow
def test_sim_answers_generated_queries_as_katago_does() -> None:
    binary, model = os.environ.get("KGBENCH_KATAGO_BIN"), os.environ.get("KGBENCH_KATAGO_MODEL")
    if not binary or not model:
        pytest.skip(SKIP_REASON)
    report = run_differential(SEED, CASES, binary, model, timeout_s=240.0)
    lines = {case.id: case.line for case in report.cases}
    shown = [f"{case_id}: {lines[case_id]}\n  " + "\n  ".join(d) for case_id, d in list(report.diffs.items())[:5]]
    assert not report.diffs, f"{len(report.diffs)} of {CASES} cases differ:\n" + "\n".join(shown)
    assert not report.stray
    # the real engine both rejected and analysed a fair share, so the comparison covered both paths
    outcomes = Counter(outcome for (_, outcome), n in report.outcomes.items() for _ in range(n))
    assert outcomes["error"] > CASES // 5 and outcomes["analysis"] > CASES // 5


@pytest.mark.katago
def test_katago_still_answers_the_hostile_lines_as_recorded(tmp_path: Path) -> None:
    """The answers tests/kgserve/sim/test_hostile_lines.py holds the sim to are what this KataGo prints."""
    binary, model = os.environ.get("KGBENCH_KATAGO_BIN"), os.environ.get("KGBENCH_KATAGO_MODEL")
    if not binary or not model:
        pytest.skip(SKIP_REASON)
    lines = [line.decode("utf-8", errors="surrogateescape") for line in LINES]
    stdout = run_lines(katago_spec(tmp_path, binary, model), lines, 240.0)
    assert answers_without_analysis(stdout, model, write_cfg(tmp_path)) == ANSWERS.read_text().splitlines()
