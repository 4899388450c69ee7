"""The traffic kinds (kgbench.load.kinds): the game order and its variants, a review's query, a player's steps, the
mixed traffic's shares, and the load settings that choose them."""

from __future__ import annotations

import pytest

from kgbench.load.kinds import (
    GameOrder,
    InteractiveTraffic,
    MixedTraffic,
    ReviewTraffic,
    apportion,
    build_traffic,
)
from kgbench.load.traffic import Game, QuerySource
from kgbench.load.types import LoadSettings


def game(name: str, moves: int) -> Game:
    vertices = ["C3", "G7", "C7", "G3", "E5", "D4", "F6", "D6"]
    played = tuple(("B" if i % 2 == 0 else "W", vertices[i]) for i in range(moves))
    base = {"rules": "chinese", "komi": 7.5, "boardXSize": 9, "boardYSize": 9}
    return Game(name=name, base=base, moves=played, stones=(), size=9, komi=7.5)


GAMES = [game("a", 3), game("b", 5), game("c", 8)]


def test_every_game_as_played_first_then_its_other_variants() -> None:
    order = GameOrder(GAMES, seed=1)
    first = [order.next() for _ in range(3)]
    assert sorted(v.game for v in first) == [0, 1, 2]
    assert all(v.symmetry == 0 and order.komi_offsets[v.komi_index] == 0 for v in first)
    rest = [order.next() for _ in range(order.size - 3)]
    assert len({(v.game, v.symmetry, v.komi_index) for v in first + rest}) == order.size and order.repeats == 0
    order.next()
    assert order.repeats == 1 and order.repeat_rate() == pytest.approx(1 / (order.size + 1))


@pytest.mark.parametrize(("symmetries", "komi_offsets"), [(0, (0.0,)), (9, (0.0,)), (8, ())])
def test_a_game_order_refuses_the_variants_a_query_source_refuses(
    symmetries: int, komi_offsets: tuple[float, ...]
) -> None:
    for source in (GameOrder, QuerySource):
        with pytest.raises(ValueError, match=r"symmetries must be 1\.\.8|komi_offsets must not be empty"):
            source(GAMES, symmetries=symmetries, komi_offsets=komi_offsets)


def test_a_review_asks_for_every_turn_of_its_game() -> None:
    review = ReviewTraffic(GameOrder(GAMES, seed=0))
    for _ in range(3):
        key, body = review.next()
        assert body["analyzeTurns"] == list(range(len(body["moves"]) + 1))
        assert len(body["moves"]) in (3, 5, 8) and ":s0:k+0" in key and "maxVisits" not in body


def test_a_player_steps_through_a_game_a_move_at_a_time_then_opens_the_next() -> None:
    traffic = InteractiveTraffic(GameOrder(GAMES, seed=2), report_every_s=0.2)
    player = traffic.client(0, 4)
    first_len = len(player.order.games[player.variant.game].moves)
    steps = [player.next() for _ in range(first_len + 2)]
    assert [len(body["moves"]) for _, body in steps[: first_len + 1]] == list(range(first_len + 1))
    assert all(body["reportDuringSearchEvery"] == 0.2 for _, body in steps)
    assert len(steps[-1][1]["moves"]) == 0 and steps[-1][0].split(":")[0] != steps[0][0].split(":")[0]
    other = traffic.client(1, 4)
    assert other.variant != player.variant  # two players never open the same game variant at once
    silent = InteractiveTraffic(GameOrder(GAMES), report_every_s=None).client(0, 1)
    assert "reportDuringSearchEvery" not in silent.next()[1]


def test_mixed_traffic_shares_the_workers_by_the_ratio() -> None:
    assert apportion(8, {"review": 0.2, "interactive": 0.6, "distinct": 0.2}) == {
        "review": 2, "interactive": 5, "distinct": 1,
    }  # fmt: skip
    assert apportion(3, {"review": 1, "interactive": 1}) == {"review": 2, "interactive": 1}
    order = GameOrder(GAMES)
    parts = {"review": ReviewTraffic(order), "interactive": InteractiveTraffic(order, 0.5)}
    mixed = MixedTraffic({**parts, "distinct": QuerySource(GAMES)}, {"review": 1, "interactive": 2, "distinct": 1})
    kinds = [mixed.client(i, 4).kind for i in range(4)]
    assert kinds == ["review", "interactive", "interactive", "distinct"]
    with pytest.raises(ValueError, match=r"load\.mix"):
        MixedTraffic(parts, {"bogus": 1.0})


def test_load_settings_choose_and_check_the_traffic() -> None:
    assert LoadSettings().game_set == "samples" and not LoadSettings().counts_turns
    review = LoadSettings(traffic="review")
    assert review.game_set == "selfplay" and review.counts_turns
    assert isinstance(build_traffic(review, games=GAMES), ReviewTraffic)
    assert isinstance(build_traffic(LoadSettings(traffic="distinct"), games=GAMES), QuerySource)
    mixed = LoadSettings.from_mapping({"traffic": "mixed", "mix": {"review": 1, "distinct": 1}})
    assert isinstance(build_traffic(mixed, games=GAMES), MixedTraffic)
    for bad, match in (
        ({"traffic": "reviews"}, "load.traffic"),
        ({"traffic": "interactive", "mode": "open"}, "closed"),
        ({"traffic": "mixed", "mix": {"review": 0}}, "load.mix"),
        ({"games": "mine"}, "load.games"),
        ({"query_fields": {"analyzeTurns": [1]}}, "analyzeTurns"),
        ({"report_every_s": 0}, "report_every_s"),
    ):
        with pytest.raises(ValueError, match=match):
            LoadSettings.from_mapping(bad)
