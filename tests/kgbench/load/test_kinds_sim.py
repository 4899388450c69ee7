"""Review and interactive traffic through kgserve over HTTP, on the simulated engine: a review's answers cover
every turn of its game once; a player keeps one query in flight, steps through its game a turn at a time and gets
partial reports; every job figure in turns is there."""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict

import pytest

from kgbench.load.games.library import load_library
from kgbench.load.generator import run_load
from kgbench.load.kinds import build_traffic
from kgbench.load.types import HttpTarget, LoadSettings, RequestRecord
from kgbench.targets.kgserve_process import kgserve_running
from kgserve.settings import load_settings
from tests.conftest import sim_env

pytestmark = pytest.mark.slow
GAMES = load_library(sizes=[9])  # the real 9x9 games: short reviews
MOVES = {g.name: len(g.moves) for g in GAMES}
WINDOWS = {"warmup_s": 0.5, "window_s": 1.0, "min_windows": 2, "max_windows": 3, "tolerance": 1.0}


def _run(load: LoadSettings, speed: float) -> tuple[list[RequestRecord], int, int]:
    settings = load_settings().with_overrides(backend="sim")
    with kgserve_running(settings, sim_env(speed, KGSERVE_SIM_STARTUP_S="0")) as proc:
        assert proc.url is not None
        result = asyncio.run(run_load(HttpTarget(proc.url), load, build_traffic(load, games=GAMES)))
    assert result.traffic == load.traffic and result.levels[0].turns_per_s > 0
    return result.records, result.turns_total, result.visits_total


def test_a_review_answers_every_turn_of_its_game_once() -> None:
    load = LoadSettings(traffic="review", concurrency=(2,), max_visits=8, **WINDOWS)  # type: ignore[arg-type]
    records, turns, visits = _run(load, 400.0)
    done = [r for r in records if r.error is None]
    assert done and not [r for r in records if r.error is not None]
    for record in done:  # the tally checked the turn numbers (0 .. the last move, once each): here, the counts
        assert record.turns == MOVES[record.position.split(":")[0]] + 1
        assert record.visits == 8 * record.turns
    assert turns >= sum(r.turns for r in done) and visits >= 8 * turns * 0.9


def test_players_keep_one_query_in_flight_and_step_through_their_game() -> None:
    load = LoadSettings(traffic="interactive", concurrency=(3,), max_visits=200, report_every_s=0.1, **WINDOWS)  # type: ignore[arg-type]
    records, _, _ = _run(load, 1.0)
    by_player: dict[str, list[RequestRecord]] = defaultdict(list)
    for record in records:
        name, _, sym, komi = record.position.split(":")
        by_player[f"{name}:{sym}:{komi}"].append(record)
    assert records and all(r.error is None and r.turns == 1 and r.kind == "interactive" for r in records)
    assert len(by_player) >= 3
    for steps in by_player.values():
        steps.sort(key=lambda r: r.send_s)
        turns = [int(r.position.split(":")[1]) for r in steps]
        assert turns == list(range(turns[0], turns[0] + len(turns)))  # a move at a time
        for before, after in itertools.pairwise(steps):
            assert after.send_s >= before.send_s + before.latency_ms / 1000 - 1e-3  # one query in flight
    assert sum(r.partials for r in records) > 0  # reportDuringSearchEvery: partial lines before the final one
