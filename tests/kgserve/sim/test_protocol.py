"""The simulated engine against the reference transcripts: error texts, actions, samples, ordering."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REFERENCE, analysis_query
from tests.helpers.analysis_checks import line_shape
from tests.kgserve.sim.conftest import Sim, run_lines, write_cfg

PROTOCOL = REFERENCE / "protocol"
SAMPLES = sorted((REFERENCE / "samples" / "inputs").glob("*.json"))


def _is_analysis(line: dict[str, object]) -> bool:
    return "isDuringSearch" in line


def test_errors_match_reference_texts_in_order(tmp_path: Path) -> None:
    lines = (PROTOCOL / "errors.in.jsonl").read_text().splitlines()
    run = run_lines(write_cfg(tmp_path), lines)
    assert run.returncode == 0, run.stderr
    expected = [line for line in (PROTOCOL / "errors.out.jsonl").read_text().splitlines() if '"moveInfos"' not in line]
    got = [line for line in run.stdout if '"isDuringSearch"' not in line]
    # query_models names this engine's own model; everything else is KataGo's exact text
    assert [g for g in got if '"query_models"' not in g] == [e for e in expected if '"query_models"' not in e]
    finals = [json.loads(line) for line in run.stdout if '"isDuringSearch"' in line]
    assert [(f["id"], f["isDuringSearch"], f["turnNumber"]) for f in finals] == [("unknown_field", False, 0)]


def test_actions(tmp_path: Path) -> None:
    lines = (PROTOCOL / "actions.in.jsonl").read_text().splitlines()
    version, models, cache = (json.loads(line) for line in run_lines(write_cfg(tmp_path), lines).stdout)
    assert version["action"] == "query_version" and version["id"] == "v"
    assert "sim" in str(version["version"]) and version["git_hash"] == "simulated"
    model = models["models"][0]  # type: ignore[index]
    assert model["name"] == "kgsim-b40c768.bin.gz" and model["internalName"] == "kgsim-b40c768"
    reference = json.loads((PROTOCOL / "actions.out.jsonl").read_text().splitlines()[1])["models"][0]
    assert set(model) == set(reference)
    assert cache == {"action": "clear_cache", "id": "c"}


@pytest.mark.parametrize("sample", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_samples_have_reference_shape(tmp_path: Path, sample: Path) -> None:
    query = json.loads(sample.read_text())
    run = run_lines(write_cfg(tmp_path), [json.dumps(query)], speed=2000.0)
    assert run.returncode == 0, run.stderr
    expected = [
        json.loads(line)
        for line in (REFERENCE / "samples" / "outputs" / f"{sample.stem}.jsonl").read_text().splitlines()
    ]
    got = run.json_lines()
    assert len(got) == len(expected)
    assert sorted(g["turnNumber"] for g in got) == sorted(e["turnNumber"] for e in expected)  # type: ignore[type-var]
    assert sorted(map(line_shape, got), key=repr) == sorted(map(line_shape, expected), key=repr)
    for line in got:
        root = line["rootInfo"]
        assert isinstance(root, dict) and root["visits"] == query["maxVisits"]
        if "allowMoves" in query:
            allowed = set(query["allowMoves"][0]["moves"])
            assert {info["move"] for info in line["moveInfos"]} <= allowed  # type: ignore[attr-defined]


def _keys_sorted(value: object) -> bool:
    if isinstance(value, dict):
        return list(value) == sorted(value) and all(_keys_sorted(v) for v in value.values())
    if isinstance(value, list):
        return all(_keys_sorted(v) for v in value)
    return True


def test_output_is_nlohmann_style(tmp_path: Path) -> None:
    query = json.loads((REFERENCE / "samples" / "inputs" / "midgame_19x19.json").read_text())
    run = run_lines(write_cfg(tmp_path), [json.dumps(query)], speed=2000.0)
    line = run.stdout[0]
    parsed = json.loads(line)
    assert _keys_sorted(parsed)
    assert ", " not in line and '": ' not in line
    assert '"edgeWeight":' in line and '"weight":200.0' in line
    assert len(parsed["ownership"]) == 361 and len(parsed["policy"]) == 362


def test_multi_turn_and_same_id(tmp_path: Path) -> None:
    lines = (PROTOCOL / "multi_turn.in.jsonl").read_text().splitlines()
    lines += (PROTOCOL / "same_id_twice.in.jsonl").read_text().splitlines()
    got = run_lines(write_cfg(tmp_path), lines).json_lines()
    assert sorted((g["id"], g["turnNumber"]) for g in got) == sorted(  # type: ignore[type-var]
        [("game", 0), ("game", 1), ("game", 2), ("game", 3), ("dup", 3), ("dup", 3)]
    )
    assert all(g["isDuringSearch"] is False for g in got)


def test_during_search_partials_then_one_final(tmp_path: Path) -> None:
    lines = (PROTOCOL / "during_search.in.jsonl").read_text().splitlines()
    got = run_lines(write_cfg(tmp_path), lines, speed=20.0).json_lines()
    assert len(got) >= 5
    assert [g["isDuringSearch"] for g in got] == [True] * (len(got) - 1) + [False]
    visits = [g["rootInfo"]["visits"] for g in got]  # type: ignore[index]
    assert visits == sorted(visits) and visits[-1] == 3000


def test_terminate_running_ack_comes_first(tmp_path: Path, start_sim: Callable[..., Sim]) -> None:
    query, terminate = (PROTOCOL / "terminate_running.in.jsonl").read_text().splitlines()
    sim = start_sim(write_cfg(tmp_path), speed=5.0)
    sim.send(query)
    # The engine answers lines in order and starts a query's search before it reads the next line: once this
    # answer is back, the search runs. (A fixed pause after the query was not enough: on a loaded machine the
    # engine was still starting, read both lines at once and the search had no visit yet when terminated.)
    sim.send('{"id":"v","action":"query_version"}')
    assert sim.readline()["id"] == "v"
    time.sleep(0.5)  # search time: the engine counts late wake-ups as searching, so visits > 0 after this
    sim.send(terminate)
    got = sim.finish().json_lines()
    assert got[0] == {"action": "terminate", "id": "t1", "terminateId": "long"}
    assert len(got) == 2 and got[1]["id"] == "long" and got[1]["isDuringSearch"] is False
    assert 0 < got[1]["rootInfo"]["visits"] < 1000000  # type: ignore[index,operator]


def test_terminate_queued_matches_reference(tmp_path: Path) -> None:
    lines = (PROTOCOL / "terminate_queued.in.jsonl").read_text().splitlines()
    cfg = write_cfg(tmp_path, numAnalysisThreads=1)
    run = run_lines(cfg, lines, speed=5.0, pauses=[0.0, 0.2, 0.3, 0.0])
    expected = (PROTOCOL / "terminate_queued.out.jsonl").read_text().splitlines()
    assert run.stdout[:3] == expected[:3]
    busy = json.loads(run.stdout[3])
    assert len(run.stdout) == 4 and busy["id"] == "busy" and busy["isDuringSearch"] is False


def test_terminate_turn_numbers_and_errors(tmp_path: Path) -> None:
    query = json.loads((PROTOCOL / "multi_turn.in.jsonl").read_text())
    query["maxVisits"] = 1000000
    cfg = write_cfg(tmp_path, numAnalysisThreads=1)
    lines = [
        json.dumps(query),
        '{"id":"x","action":"terminate"}',
        '{"id":"y","action":"terminate","terminateId":"game","turnNumbers":"no"}',
        '{"id":"t","action":"terminate","terminateId":"game","turnNumbers":[2,3]}',
        '{"id":"all","action":"terminate_all"}',
    ]
    got = run_lines(cfg, lines, speed=5.0, pauses=[0, 0.3]).json_lines()
    assert got[0]["field"] == "terminateId" and got[1]["field"] == "turnNumbers"
    assert [g["turnNumber"] for g in got[2:4]] == [2, 3] and all(g.get("noResults") for g in got[2:4])
    assert got[4]["action"] == "terminate" and got[6]["action"] == "terminate_all"
    assert {got[5]["turnNumber"], got[7]["turnNumber"]} == {0, 1}


def test_eof_finishes_queued_work_and_prints_stats(tmp_path: Path) -> None:
    query = analysis_query("q", size=9, max_visits=50)
    lines = [json.dumps({**query, "id": f"q{i}"}) for i in range(12)]
    run = run_lines(write_cfg(tmp_path, numAnalysisThreads=2), lines)
    assert run.returncode == 0
    assert sorted(g["id"] for g in run.json_lines()) == sorted(f"q{i}" for i in range(12))  # type: ignore[type-var]
    tail = [line.split(": ", 1)[1] for line in run.stderr.splitlines() if ": NN " in line]
    assert tail[0].startswith("NN rows: ") and int(tail[0].split(": ")[1]) > 0
    assert tail[1].startswith("NN batches: ") and tail[2].startswith("NN avg batch size: ")
    assert "Started, ready to begin handling requests" in run.stderr and "SIMULATED" in run.stderr
