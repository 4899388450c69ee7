"""Distinct-position traffic: prefixes x symmetries x komi, symmetric transforms, repeat accounting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgbench.load.traffic import (
    DEFAULT_DIRS,
    Position,
    QuerySource,
    load_games,
    parse_vertex,
    transform_point,
    transform_vertex,
)


def test_default_dirs_exist_and_games_are_read_once() -> None:
    assert all(d.is_dir() for d in DEFAULT_DIRS)
    games = load_games()
    names = [g.name for g in games]
    assert len(names) == len(set(names)) == 5
    assert sum(g.prefixes for g in games) == (220 + 1) + (110 + 1) + 3


def test_source_size_is_prefixes_times_symmetries_times_komi() -> None:
    src = QuerySource.from_dirs(komi_offsets=(0.0, 1.0))
    assert src.size == 335 * 8 * 2
    assert QuerySource.from_dirs(symmetries=1, komi_offsets=(0.0,)).size == 335


def test_eight_symmetries_are_distinct_and_a_group() -> None:
    p = (2, 5)
    images = {transform_point(p, s, 19) for s in range(8)}
    assert len(images) == 8
    for s in range(8):
        assert all(0 <= c < 19 for c in transform_point(p, s, 19))
    assert transform_point(p, 0, 19) == p
    with pytest.raises(ValueError):
        transform_point(p, 8, 19)


def test_vertex_transform_skips_i_and_keeps_pass() -> None:
    assert parse_vertex("J1", 19) == (8, 0)
    assert transform_vertex("A1", 1, 19) == "T1"
    assert transform_vertex("A1", 2, 19) == "A19"
    assert transform_vertex("C4", 4, 19) == "D3"
    assert transform_vertex("pass", 3, 9) == "pass"
    with pytest.raises(ValueError):
        parse_vertex("K10", 9)


def test_no_repeat_until_every_position_was_sent(tmp_path: Path) -> None:
    (tmp_path / "g.json").write_text(
        json.dumps(
            {
                "id": "g",
                "moves": [["B", "C3"], ["W", "G7"]],
                "komi": 7.0,
                "boardXSize": 9,
                "boardYSize": 9,
                "analyzeTurns": [1],
                "maxVisits": 9,
                "rules": "chinese",
            }
        )
    )
    src = QuerySource.from_dirs([tmp_path], seed=3, komi_offsets=(0.0, 0.5))
    assert src.size == 3 * 8 * 2
    keys = [src.next()[0] for _ in range(src.size)]
    assert len(set(keys)) == src.size and src.repeat_rate() == 0.0
    for _ in range(src.size // 2):
        src.next()
    assert src.repeat_rate() == pytest.approx((src.size // 2) / (src.size * 1.5))


def test_query_body_is_a_valid_transformed_position(tmp_path: Path) -> None:
    (tmp_path / "t.json").write_text(
        json.dumps(
            {
                "id": "t",
                "initialStones": [["B", "A1"]],
                "moves": [],
                "komi": 6.5,
                "boardXSize": 9,
                "boardYSize": 9,
                "maxVisits": 9,
                "allowMoves": [{"player": "W", "moves": ["B2", "pass"], "untilDepth": 1}],
            }
        )
    )
    src = QuerySource.from_dirs([tmp_path], seed=0, komi_offsets=(-1.0, 0.0))
    bodies = [src.next() for _ in range(src.size)]
    stones = {b["initialStones"][0][1] for _, b in bodies}
    assert stones == {"A1", "J1", "A9", "J9"}  # the corner maps to the 4 corners
    assert {b["komi"] for _, b in bodies} == {5.5, 6.5}
    for _, b in bodies:
        assert "id" not in b and "maxVisits" not in b and "analyzeTurns" not in b
        assert b["allowMoves"][0]["moves"][1] == "pass"
        assert b["allowMoves"][0]["moves"][0] in {"B2", "H2", "B8", "H8"}


def test_same_seed_same_order() -> None:
    a, b, c = QuerySource.from_dirs(seed=5), QuerySource.from_dirs(seed=5), QuerySource.from_dirs(seed=6)
    first = [a.next()[0] for _ in range(20)]
    assert first == [b.next()[0] for _ in range(20)]
    assert first != [c.next()[0] for _ in range(20)]


def test_empty_dir_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no sample queries"):
        load_games([tmp_path])


def test_cached_queries_equal_built_queries() -> None:
    from kgbench.load.traffic import build_query

    src = QuerySource.from_dirs(seed=9)
    for _ in range(300):
        key, body = src.next()
        name, prefix, sym, komi = key.split(":")
        game = next(g for g in src.games if g.name == name)
        expected = build_query(game, int(prefix), int(sym[1:]), game.komi + float(komi[1:]))
        assert body == expected
    game = src.games[0]
    pos = Position(0, game.prefixes - 1, 3, 0)
    src.query(pos)["moves"].append(["B", "A1"])  # a caller appending to a body's moves must not corrupt the cache
    src.query(pos)["komi"] = 99
    assert src.query(pos) == build_query(game, game.prefixes - 1, 3, game.komi + src.komi_offsets[0])
