"""The simulated engine orders waiting work as KataGo does (cpp/command/analysis.cpp, `toAnalyzeQueue`).

A free search thread takes the waiting request with the highest `priority`, earlier requests first on a
tie; a running search is never preempted.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import analysis_query
from tests.kgserve.sim.conftest import run_lines, write_cfg


def line(caller_id: str, visits: int, priority: int | None = None) -> str:
    body: dict[str, object] = analysis_query(caller_id, moves=[["B", "Q4"], ["W", "D4"]], max_visits=visits)
    if priority is not None:
        body["priority"] = priority
    return json.dumps(body)


def test_free_thread_takes_highest_priority_and_running_search_is_not_preempted(tmp_path: Path) -> None:
    cfg = write_cfg(tmp_path, numAnalysisThreads=1)
    lines = [
        line("busy", 2000),  # starts at once: the only thread is busy with it
        line("low", 50, -5),
        line("plain", 50),
        line("high", 50, 7),
        line("high-later", 50, 7),
        line("top", 50, 2**62 - 1),
    ]
    got = run_lines(cfg, lines, speed=20.0, pauses=[0.0, 0.3]).json_lines()
    finals = [g for g in got if g.get("isDuringSearch") is False]
    assert [g["id"] for g in finals] == ["busy", "top", "high", "high-later", "plain", "low"]
    assert finals[0]["rootInfo"]["visits"] == 2000  # type: ignore[index]


def test_priorities_per_turn(tmp_path: Path) -> None:
    cfg = write_cfg(tmp_path, numAnalysisThreads=1)
    turns = json.loads(line("game", 50))
    turns.update(analyzeTurns=[0, 1, 2], priorities=[1, 9, 5])
    got = run_lines(cfg, [line("busy", 2000), json.dumps(turns)], speed=20.0, pauses=[0.0, 0.3]).json_lines()
    order = [g["turnNumber"] for g in got if g["id"] == "game"]
    assert order == [1, 2, 0]
