"""`python -m kgserve.batch` on the real KataGo (backend eigen), in its own engine pool (--config) and through
`python -m kgserve`: handicap records, a record KataGo refuses a move of, JSONL answered as KataGo answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.katago.conftest import RealKatago, start_kgserve, tier_config
from tests.kgserve.batch.conftest import HANDICAP, answers, run_batch

pytestmark = pytest.mark.katago

ILLEGAL = "(;GM[1]FF[4]SZ[9]KM[6.5]RU[Chinese];B[ee];W[ee])"  # white plays on black's stone


def test_sgf_records_on_the_real_engine_pool_and_through_kgserve(tmp_path: Path, real_katago: RealKatago) -> None:
    games = tmp_path / "games"
    games.mkdir()
    (games / "handicap.sgf").write_text(HANDICAP, encoding="utf-8")
    (games / "illegal.sgf").write_text(ILLEGAL, encoding="utf-8")
    config = tier_config(tmp_path, real_katago)
    direct = tmp_path / "direct.jsonl"
    done = run_batch(games, "-o", direct, "--config", config, "--visits", "8", "--positions", "every:2")
    assert done.returncode == 1, done.stderr  # the illegal move's position is KataGo's error line
    got = answers(direct)
    assert [a.get("id") for a in got] == ["handicap.sgf:0", "handicap.sgf:2", "handicap.sgf:4", "illegal.sgf:0",
                                         "illegal.sgf:2"]  # fmt: skip
    assert got[0]["rootInfo"]["currentPlayer"] == "W"  # type: ignore[index]
    assert "error" in got[4] and "error" not in got[3] and "NN rows per visit" in done.stderr
    server = start_kgserve(config)
    try:
        served = tmp_path / "served.jsonl"
        over_http = run_batch(games, "-o", served, "--url", str(server.url), "--visits", "8", "--positions", "every:2")
    finally:
        server.stop()
    assert over_http.returncode == 1, over_http.stderr
    assert [json.dumps(sorted(a)) for a in answers(served)] == [json.dumps(sorted(a)) for a in got]
