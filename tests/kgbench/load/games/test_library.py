"""The repository's real games (assets/analysis/games): enough of them, each one parsed and replayed by the rules,
each with its provenance; and the traffic reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgbench.load.games.board import replay
from kgbench.load.games.library import GAMES_DIR, GameFileError, game_files, load_library
from kgserve.katago.sgf import parse_sgf


def test_at_least_100_full_19x19_games_and_a_few_9x9_and_13x13() -> None:
    counts = {size: len(game_files(GAMES_DIR, [size])) for size in (9, 13, 19)}
    assert counts[19] >= 100 and counts[13] >= 3 and counts[9] >= 3, counts


@pytest.mark.parametrize("path", game_files(GAMES_DIR), ids=lambda p: p.stem)
def test_each_game_parses_replays_legally_and_says_where_it_came_from(path: Path) -> None:
    game = parse_sgf(path.read_text(encoding="utf-8"))
    assert path.parent.name == f"{game.size}x{game.size}"
    assert game.rules in ("Japanese", "Chinese") and game.komi in (6.5, 7.5)
    done = replay(game.size, game.moves, game.setup, first="B")
    assert len(game.moves) >= 0.3 * game.size * game.size, "a full game, not an opening"
    assert game.props["AP"].startswith("kgbench.load.games.selfplay")
    assert "KataGo" in game.props["PB"] and "visits" in game.props["PB"] and game.props["RE"]
    assert "python -m kgbench.load.games.selfplay" in game.props["GC"]
    if game.props["RE"].endswith("+R"):
        assert done.passes < 2 or game.moves[-1][1] != "pass"


def test_the_traffic_reads_every_game() -> None:
    games = load_library()
    assert len(games) == len(game_files(GAMES_DIR))
    assert all(g.moves and g.base["boardXSize"] == g.size for g in games)
    assert len(load_library(sizes=[9])) == len(game_files(GAMES_DIR, [9]))


def test_a_folder_without_games_or_with_a_broken_one_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(GameFileError, match="no games"):
        load_library(tmp_path)
    (tmp_path / "19x19").mkdir()
    (tmp_path / "19x19" / "bad.sgf").write_text("(;SZ[19];B[zz])")
    with pytest.raises(GameFileError, match=r"bad\.sgf"):
        load_library(tmp_path)
