"""Smoke test of the soak benchmark: real kgserve + sim engines, tiny numbers."""

from __future__ import annotations

import pytest

from benchmarks import soak


def test_check_answer_detects_cross_delivery() -> None:
    line = b'{"id":"c1","isDuringSearch":false,"turnNumber":7,"rootInfo":{"visits":12}}\n'
    assert soak.check_answer(line, "c1", 7, 12) == "ok"
    assert soak.check_answer(line, "c2", 7, 12) == "cross"
    assert soak.check_answer(line, "c1", 8, 12) == "cross"
    assert soak.check_answer(line, "c1", 7, 13) == "cross"
    assert soak.check_answer(b'{"id":"c1","isDuringSearch":true}\n', "c1", 7, 12) == "truncated"


def test_failure_kinds() -> None:
    assert soak.failure_kind(429, b"busy") == "http_429"
    died = b'{"error":"engine died before finishing this query (engine[0] exited (killed by signal 9))"}'
    assert soak.failure_kind(503, died) == "http_503 engine died mid-query"
    busy = b'{"error":"engine unavailable: kgserve could not submit this query (0 of 1 ready; engine[0] exited)"}'
    assert soak.failure_kind(503, busy) == "http_503 no engine ready"


def test_request_plan_collides_ids_but_not_fingerprints() -> None:
    moves = [["B", "A1"]] * 220
    plans = [soak.expected_request(i, moves, 8) for i in range(2000)]
    assert len({p[0] for p in plans}) == 8
    by_id: dict[str, set[tuple[int, int]]] = {}
    for cid, turn, visits in plans[:200]:  # far more than are ever in flight at once
        assert (turn, visits) not in by_id.setdefault(cid, set())
        by_id[cid].add((turn, visits))


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_soak_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    argv = "--requests 300 --disconnect-share 0.1 --kills 1 --processes 2 --concurrency 16 --max-seconds 60"
    code = soak.main(argv.split())
    out = capsys.readouterr().out
    assert "| lost | 0 |" in out and "| cross-delivered | 0 |" in out and "| unaccounted | 0 |" in out
    assert "| requests sent | 300 |" in out
    assert "engine SIGKILLs / restarts seen | 1 /" in out
    assert "RSS kgserve start → end" in out and "logical CPUs" in out
    assert code == 0
