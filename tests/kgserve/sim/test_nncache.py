"""The simulated engine's NN cache across searches (kgserve/sim/model/nncache.py): successive positions of one game
share evaluations, distinct ones do not, a small table forgets, no table shares nothing; and the sim process
evaluates fewer NN rows per visit for a game's successive positions than for distinct positions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgserve.sim.model.nncache import SHARES, CacheShares, NNCacheModel, cache_speedup
from kgserve.sim.model.profiles import get_profile
from kgserve.sim.model.throughput import SimParams, predict_throughput
from tests.conftest import analysis_query
from tests.kgserve.sim.conftest import Sim, sim_env, write_cfg

SHARED = CacheShares(same=0.85, parent=0.4, child=0.3, concurrent=0.5)


def searched(model: NNCacheModel, key: bytes, parent: bytes | None, visits: float = 100) -> float:
    hit = model.start(key, parent, visits, running=1)
    model.wrote(visits * (1 - hit))
    model.finish(key, visits)
    return hit


def test_successive_positions_share_and_distinct_ones_do_not() -> None:
    model = NNCacheModel(20, SHARED)
    assert searched(model, b"p0", None) == 0.0
    assert searched(model, b"p1", b"p0") == pytest.approx(0.4, rel=0.01)  # the move before: its tree holds ours
    assert searched(model, b"x", b"y") == 0.0  # an unrelated position
    assert searched(model, b"p1", b"p0") > 0.85  # the same position again (and its parent)
    child_first = NNCacheModel(20, SHARED)
    searched(child_first, b"q1", b"q0")
    assert searched(child_first, b"q0", None) == pytest.approx(0.3, rel=0.01)  # the move after was searched


def test_a_running_neighbour_gives_what_it_has_done_and_a_share_of_the_rest() -> None:
    model = NNCacheModel(20, SHARED)
    model.start(b"p0", None, 100, running=1)
    assert model.start(b"p1", b"p0", 100, running=2) == pytest.approx(0.2, rel=0.01)  # just begun: CONCURRENT
    model.follow(b"p1", lambda: 0.5)
    assert model.start(b"p2", b"p1", 100, running=3) == pytest.approx(0.4 * 0.75, rel=0.01)  # half done


def test_a_small_table_forgets_and_no_table_shares_nothing() -> None:
    hits = {}
    for pow2 in (-1, 4, 8, 12, 20):
        model = NNCacheModel(pow2, SHARED)
        searched(model, b"p0", None)
        for i in range(5):  # other searches write between the two
            searched(model, f"other{i}".encode(), None)
        hits[pow2] = searched(model, b"p1", b"p0")
    assert hits[-1] == 0.0 and hits[4] < 0.01
    assert hits[4] < hits[8] < hits[12] < hits[20] <= 0.4
    model = NNCacheModel(20, SHARED)
    searched(model, b"p0", None)
    model.clear()
    assert searched(model, b"p1", b"p0") == 0.0


def test_hits_speed_a_gpu_search_more_than_a_cpu_one() -> None:
    gpu, cpu = get_profile("h100-b40c768nbt"), get_profile("cpu-eigen-b6c96")
    assert cache_speedup(gpu, 0.5) == pytest.approx(2.0)
    assert 1.0 < cache_speedup(cpu, 0.5) < 2.0 and cache_speedup(cpu, 0.0) == 1.0


def _rows_per_visit(tmp_path: Path, queries: list[dict[str, object]]) -> float:
    """NN rows per visit of a fresh one-thread engine answering `queries` one at a time (its exit statistics)."""
    tmp_path.mkdir()
    sim = Sim(write_cfg(tmp_path, numAnalysisThreads=1), sim_env(400.0))
    visits = 0
    try:
        for query in queries:
            sim.send(json.dumps(query))
            turns = query.get("analyzeTurns")
            for _ in range(len(turns) if isinstance(turns, list) else 1):
                answer = sim.readline()
                assert answer["isDuringSearch"] is False, answer
                visits += int(answer["rootInfo"]["visits"])  # type: ignore[index]
        run = sim.finish()
    finally:
        sim.kill()
    rows = int(next(line for line in run.stderr.splitlines() if "NN rows: " in line).split("NN rows: ")[1])
    return rows / visits


def test_the_sim_evaluates_fewer_rows_per_visit_for_a_game_than_for_distinct_positions(tmp_path: Path) -> None:
    assert SHARES.parent > 0 and SHARES.child > 0  # calibrated: successive positions share
    points = [f"{'ABCDEFGHJKLMNOPQRST'[x]}{y + 1}" for x in range(2, 17, 3) for y in range(2, 17, 3)]  # no captures
    moves = [["B" if i % 2 == 0 else "W", p] for i, p in enumerate(points)]
    review = analysis_query("review", moves=moves, max_visits=100, analyzeTurns=list(range(len(moves) + 1)))
    distinct = [
        analysis_query(f"d{turn}", moves=moves[:turn], max_visits=100, komi=7.5 + turn)  # other komi: other positions
        for turn in range(len(moves) + 1)
    ]
    game = _rows_per_visit(tmp_path / "game", [review])
    apart = _rows_per_visit(tmp_path / "apart", distinct)
    assert game < 0.9 * apart, (game, apart)


def test_no_table_is_a_setting_the_sim_takes() -> None:
    # KataGo's nnCacheSizePowerOfTwo = -1: no table at all (the reference with nothing cached)
    params = SimParams.from_cfg({"nnCacheSizePowerOfTwo": -1}, "cpu-eigen-b6c96")
    assert params.cache_entries == 0 and SimParams(cache_pow=20).cache_entries == 1 << 20
    assert predict_throughput({"nnCacheSizePowerOfTwo": -1}, 16, 4, "cpu-eigen-b6c96") > 0
