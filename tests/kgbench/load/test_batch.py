"""load=batch (kgbench.load.batch): a bulk client's positions in file order, one a query, every worker on one
stream; through kgserve on the simulated engine, every position answered once with the cfg's visits."""

from __future__ import annotations

import asyncio

import pytest
from hydra import compose, initialize_config_dir

from kgbench.load.batch import BatchTraffic
from kgbench.load.games.library import load_library
from kgbench.load.generator import run_load
from kgbench.load.kinds import build_traffic
from kgbench.load.traffic import Game
from kgbench.load.types import HttpTarget, LoadSettings
from kgbench.targets.kgserve_process import kgserve_running
from kgserve.paths import PROJECT_ROOT
from kgserve.settings import load_settings
from tests.conftest import sim_env


def game(name: str, moves: int, size: int = 19, komi: float = 6.5) -> Game:
    vertices = ["D4", "Q16", "D16", "Q4", "K10", "C3", "R17", "C17"]
    played = tuple(("B" if i % 2 == 0 else "W", vertices[i]) for i in range(moves))
    base = {"rules": "japanese", "komi": komi, "boardXSize": size, "boardYSize": size}
    return Game(name=name, base=base, moves=played, stones=(), size=size, komi=komi)


def test_positions_go_in_file_order_one_turn_a_query_with_the_records_rules_and_komi() -> None:
    traffic = BatchTraffic([game("a", 3), game("small", 4, size=9), game("b", 2, komi=7.5), game("empty", 0)])
    sent = [traffic.client(i, 4).next() for i in range(5)]  # four workers, one stream
    assert [key for key, _ in sent] == ["a:1:s0", "a:2:s0", "a:3:s0", "b:1:s0", "b:2:s0"]
    for (key, body), komi in zip(sent, (6.5, 6.5, 6.5, 7.5, 7.5), strict=True):
        turn = int(key.split(":")[1])
        assert body["analyzeTurns"] == [turn] and len(body["moves"]) == turn
        assert body["komi"] == komi and body["rules"] == "japanese" and body["boardXSize"] == 19
        assert "maxVisits" not in body and "id" not in body
    assert sent[0][1]["moves"] == [["B", "D4"]]
    assert traffic.positions == 5 and traffic.size == 40 and traffic.repeats == 0


def test_past_the_last_position_the_next_symmetry_and_only_then_repeats() -> None:
    traffic = BatchTraffic([game("a", 2)])
    keys = [traffic.next()[0] for _ in range(2 * 8)]
    assert keys[:4] == ["a:1:s0", "a:2:s0", "a:1:s1", "a:2:s1"] and len(set(keys)) == 16
    moved = traffic.next()[1]["moves"]  # symmetry 0 again: a repeat
    assert moved == [["B", "D4"]] and traffic.repeats == 1 and traffic.repeat_rate() == pytest.approx(1 / 17)


def test_no_19x19_position_is_an_error() -> None:
    with pytest.raises(ValueError, match="no 19x19 game"):
        BatchTraffic([game("small", 4, size=9), game("empty", 0)])


def test_load_batch_composes_to_the_batch_clients_shape() -> None:
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base=None):
        cfg = compose("config", overrides=["load=batch"])
    load = LoadSettings.from_mapping(cfg.load)
    assert load.traffic == "batch" and load.max_visits is None and load.concurrency == (512,)
    assert load.game_set == "selfplay" and load.counts_turns and load.request_timeout_s == 60.0
    traffic = build_traffic(load)
    assert isinstance(traffic, BatchTraffic) and traffic.games[0].name == "selfplay-19-000"
    assert traffic.positions == sum(len(g.moves) for g in load_library(sizes=[19]))


@pytest.mark.slow
def test_every_position_is_answered_once_with_the_cfgs_visits_through_kgserve(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = tmp_path / "batch.cfg"
    cfg.write_text("numAnalysisThreads = 8\nnumSearchThreadsPerAnalysisThread = 1\nmaxVisits = 6\n")
    settings = load_settings().with_overrides(backend="sim")
    settings = settings.model_copy(update={"engine": settings.engine.model_copy(update={"cfg": cfg})})
    load = LoadSettings(traffic="batch", concurrency=(24,), max_visits=None, warmup_s=0.5, window_s=1.0,
                        min_windows=2, max_windows=3, tolerance=1.0)  # fmt: skip
    with kgserve_running(settings, sim_env(400.0, KGSERVE_SIM_STARTUP_S="0")) as proc:
        assert proc.url is not None
        result = asyncio.run(run_load(HttpTarget(proc.url), load, build_traffic(load)))
    done = [r for r in result.records if r.error is None]
    assert done and not [r for r in result.records if r.error is not None]
    assert all(r.turns == 1 and r.visits == 6 and r.kind == "batch" for r in done)  # the cfg's maxVisits
    keys = [r.position for r in result.records]
    assert len(set(keys)) == len(keys) and {k.split(":")[0] for k in keys} >= {"selfplay-19-000"}
    assert result.levels[0].turns_per_s > 0 and result.traffic == "batch"
