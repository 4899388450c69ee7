"""SGF read and written, and a game replayed by the rules: the pure parts of kgbench.load.games."""

from __future__ import annotations

import pytest

from kgbench.load.games.board import IllegalMove, replay
from kgbench.load.games.library import query_rules, to_traffic_game
from kgserve.katago.sgf import SgfError, from_gtp, parse_sgf, to_gtp, write_sgf


def test_points_convert_both_ways_and_skip_i() -> None:
    assert to_gtp("pd", 19) == "Q16" and from_gtp("Q16", 19) == "pd"
    assert to_gtp("aa", 19) == "A19" and to_gtp("ss", 19) == "T1" and to_gtp("ia", 9) == "J9"
    assert to_gtp("", 19) == "pass" and to_gtp("tt", 19) == "pass" and from_gtp("pass", 9) == ""
    with pytest.raises(SgfError):
        to_gtp("jj", 9)


def test_a_written_game_reads_back() -> None:
    moves = [("B", "Q16"), ("W", "D4"), ("B", "pass"), ("W", "C3")]
    text = write_sgf(19, 6.5, "Japanese", moves, {"GN": "g", "GC": "made by [a test]\\ here"})
    game = parse_sgf(text)
    assert (game.size, game.komi, game.rules, game.moves) == (19, 6.5, "Japanese", tuple(moves))
    assert game.props["GC"] == "made by [a test]\\ here" and game.props["GN"] == "g"


def test_the_main_line_is_read_and_variations_skipped() -> None:
    text = "(;GM[1]SZ[9]KM[7]RU[Chinese]AB[cc][gg]PL[W];W[ee](;B[dd];W[ff])(;B[aa]))"
    game = parse_sgf(text)
    assert game.moves == (("W", "E5"), ("B", "D6"), ("W", "F4"))
    assert game.setup == (("B", "C7"), ("B", "G3")) and game.to_move == "W"
    for bad in ("no tree", "(;SZ[9];B[ee]", "(;SZ[9:7])", "(;SZ[9];B[ee]W[dd])"):
        with pytest.raises(SgfError):
            parse_sgf(bad)


def test_replay_captures_and_refuses_illegal_moves() -> None:
    # a white stone on A1 captured by B1 + A2
    done = replay(9, [("B", "B1"), ("W", "A1"), ("B", "A2")])
    assert done.captured == {"B": 1, "W": 0} and done.rows[-1][0] == "."
    with pytest.raises(IllegalMove, match="move 2: the point is occupied"):
        replay(9, [("B", "E5"), ("W", "E5")])
    with pytest.raises(IllegalMove, match="suicide"):
        replay(9, [("B", "B1"), ("W", "pass"), ("B", "A2"), ("W", "A1")])
    with pytest.raises(IllegalMove, match="out of turn"):
        replay(9, [("B", "E5"), ("B", "E6")])


def test_replay_refuses_an_immediate_ko_recapture_but_not_a_later_one() -> None:
    # black E4 in atari inside white's mouth; white D4 takes it (a ko): black may not retake at once, later it may
    shape = [("B", "D5"), ("W", "E5"), ("B", "C4"), ("W", "F4"), ("B", "D3"), ("W", "E3"), ("B", "E4"), ("W", "D4")]
    with pytest.raises(IllegalMove, match="ko"):
        replay(9, [*shape, ("B", "E4")])
    later = replay(9, [*shape, ("B", "A9"), ("W", "A8"), ("B", "E4")])
    assert later.captured == {"B": 1, "W": 1}


def test_an_sgf_game_becomes_a_traffic_game() -> None:
    game = to_traffic_game("g", parse_sgf("(;SZ[13]KM[7.5]RU[Chinese];B[dd];W[jj])"))
    assert game.base == {"rules": "chinese", "komi": 7.5, "boardXSize": 13, "boardYSize": 13}
    assert game.moves == (("B", "D10"), ("W", "K4")) and game.size == 13
    assert query_rules("") == "japanese" and query_rules("NZ") == "new-zealand"
    with pytest.raises(ValueError, match="no KataGo name"):
        query_rules("ing")
