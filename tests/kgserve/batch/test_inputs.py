"""kgserve.batch.inputs: SGF records and JSONL lines as rows, in input order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgserve.batch.inputs import InputError, JsonlSource, PositionSpec, QuerySettings, SgfSource, rows, survey

HANDICAP = "(;GM[1]FF[4]SZ[9]KM[0.5]HA[2]RU[Chinese]AB[cc][gg];W[ee];B[dd];W[ff])"
SETUP = "(;GM[1]FF[4]SZ[13]KM[7]RU[koPOSITIONALscoreAREAtaxNONEsui1]AB[aa]AW[bb]PL[W])"
PLAIN = "(;GM[1]FF[4]SZ[9]KM[6.5];B[ee];W[cc];B[gg];W[cg];B[gc];W[])"


def _records(folder: Path, **texts: str) -> Path:
    folder.mkdir(exist_ok=True)
    for name, text in texts.items():
        (folder / f"{name}.sgf").write_text(text, encoding="utf-8")
    return folder


def _bodies(source: SgfSource | JsonlSource, settings: QuerySettings | None = None) -> list[dict]:
    return [json.loads(row.line) for row in rows(source, settings or QuerySettings()) if row.line is not None]


@pytest.mark.parametrize(
    ("spec", "turns"),
    [("all", [0, 1, 2, 3, 4, 5, 6]), ("last", [6]), ("every:4", [0, 4, 6]), ("every:3", [0, 3, 6])],
)
def test_positions_of_a_record(tmp_path: Path, spec: str, turns: list[int]) -> None:
    bodies = _bodies(SgfSource([_records(tmp_path / "g", plain=PLAIN)], PositionSpec.parse(spec)))
    assert [b["id"] for b in bodies] == [f"plain.sgf:{t}" for t in turns]
    assert [len(b["moves"]) for b in bodies] == turns
    assert bodies[-1]["moves"][-1] == ["W", "pass"] and bodies[0]["komi"] == 6.5 and bodies[0]["boardXSize"] == 9
    assert bodies[0]["rules"] == "japanese"  # no RU: what SGF readers assume


def test_a_seeded_sample_is_the_same_on_every_pass_and_changes_with_the_seed(tmp_path: Path) -> None:
    folder = _records(tmp_path / "g", plain=PLAIN)
    first = [b["id"] for b in _bodies(SgfSource([folder], PositionSpec.parse("sample:3", seed=7)))]
    again = [b["id"] for b in _bodies(SgfSource([folder], PositionSpec.parse("sample:3", seed=7)))]
    others = {tuple(b["id"] for b in _bodies(SgfSource([folder], PositionSpec.parse("sample:3", seed=s))))
              for s in range(8)}  # fmt: skip
    assert first == again and len(first) == 3 and first == sorted(first, key=lambda i: int(i.split(":")[1]))
    assert len(others) > 1


def test_handicap_and_setup_stones_are_initial_stones(tmp_path: Path) -> None:
    folder = _records(tmp_path / "g", hc=HANDICAP, setup=SETUP)
    hc0, *_, hc3, setup0 = _bodies(SgfSource([folder], PositionSpec.parse("all")))
    assert hc0["id"] == "hc.sgf:0" and hc0["moves"] == []
    assert hc0["initialStones"] == [["B", "C7"], ["B", "G3"]] and hc0["initialPlayer"] == "W"  # white moves first
    assert hc3["moves"] == [["W", "E5"], ["B", "D6"], ["W", "F4"]] and hc3["rules"] == "Chinese"
    assert setup0["initialStones"] == [["B", "A13"], ["W", "B12"]] and setup0["initialPlayer"] == "W"
    assert setup0["rules"] == "koPOSITIONALscoreAREAtaxNONEsui1"  # KataGo self-play's rules, as KataGo reads them


def test_an_unreadable_record_is_named_and_skipped(tmp_path: Path) -> None:
    folder = _records(tmp_path / "g", good=PLAIN, broken="(;SZ[9];B[ee", rules="(;SZ[9]RU[nonsense];B[ee])")
    source = SgfSource([folder], PositionSpec.parse("last"))
    found = survey(source)
    assert found.rows == 1 and set(found.problems) == {"broken.sgf", "rules.sgf"}
    assert "offset" in found.problems["broken.sgf"] and "RU[nonsense]" in found.problems["rules.sgf"]


def test_jsonl_lines_keep_their_place_and_a_bad_line_gets_katagos_error(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"id":"a","moves":[],"rules":"chinese","komi":7.5,"boardXSize":9,"boardYSize":9}\n\n'
                    'not json\n{"moves":[]}\n{"id":"b","analyzeTurns":[0,1],"moves":[["B","E5"]]}\n')  # fmt: skip
    got = list(rows(JsonlSource([path]), QuerySettings(visits=5, include=("includeOwnership",))))
    assert [row.index for row in got] == [0, 1, 2, 3] and [row.caller_id for row in got] == ["a", None, None, "b"]
    assert got[1].rejected is not None and b"could not parse input line as json request: not json" in got[1].rejected
    assert got[2].rejected == b'{"error":"Request must have a string \\"id\\" field"}'
    assert got[3].finals == 2
    body = json.loads(got[0].line or b"")
    assert body["maxVisits"] == 5 and body["includeOwnership"] is True and body["komi"] == 7.5


def test_settings_apply_to_every_query_and_merge_override_settings() -> None:
    settings = QuerySettings(10, ("includePolicy",), {"rootNumSymmetriesToSample": 2})
    body = settings.apply({"id": "x", "maxVisits": 99, "overrideSettings": {"wideRootNoise": 0.1}})
    assert body == {"id": "x", "maxVisits": 10, "includePolicy": True,
                    "overrideSettings": {"wideRootNoise": 0.1, "rootNumSymmetriesToSample": 2}}  # fmt: skip
    assert settings.digest() != QuerySettings(11, ("includePolicy",)).digest()


def test_a_duplicate_id_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"id":"a","moves":[]}\n{"id":"a","moves":[]}\n')
    with pytest.raises(InputError, match="'a' appears twice"):
        survey(JsonlSource([path]))
