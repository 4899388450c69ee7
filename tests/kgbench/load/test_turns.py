"""A response read line by line into its analysed turns (kgbench.load.turns): every turn asked for answered once."""

from __future__ import annotations

import json

from kgbench.load.turns import TurnTally, expected_turns


def final(turn: int, visits: int = 10) -> bytes:
    doc = {"id": "r", "isDuringSearch": False, "moveInfos": [{"move": "D4"}], "rootInfo": {"visits": visits},
           "turnNumber": turn}  # fmt: skip
    return json.dumps(doc, separators=(",", ":")).encode()


def partial(turn: int) -> bytes:
    doc = {"id": "r", "isDuringSearch": True, "moveInfos": [], "rootInfo": {"visits": 3}, "turnNumber": turn}
    return json.dumps(doc).encode()


def test_a_review_answers_every_turn_once_in_any_order() -> None:
    seen: list[int] = []
    tally = TurnTally(expected_turns({"moves": [["B", "D4"]] * 3, "analyzeTurns": [0, 1, 2, 3]}), seen.append)
    for line in (final(2, 12), partial(0), final(0), final(3), final(1)):
        tally.feed(line)
    out = tally.outcome(200, 999)
    assert (out.error, out.turns, out.visits, out.partials) == (None, 4, 42, 1)
    assert seen == [12, 10, 10, 10]  # each turn counted as its final line arrived


def test_a_turn_missing_or_answered_twice_is_an_error_but_its_turns_still_count() -> None:
    missing = TurnTally(frozenset({0, 1, 2})).feed_all([final(0), final(2)])
    assert missing.outcome(200, 1).error == "missing_turns" and missing.outcome(200, 1).turns == 2
    twice = TurnTally(frozenset({0, 1})).feed_all([final(0), final(1), final(1)])
    assert twice.outcome(200, 1).error == "missing_turns" and twice.duplicates == 1
    nothing = TurnTally(frozenset({0})).feed_all([partial(0)])
    assert nothing.outcome(200, 1).error == "bad_response"


def test_lines_split_across_chunks_errors_and_warnings() -> None:
    tally = TurnTally(None)
    data = b'{"field":"x","id":"r","warning":"unused"}\n' + final(7)
    for i in range(0, len(data), 7):
        tally.feed_chunk(data[i : i + 7])
    tally.close()
    assert tally.outcome(200, len(data)).error is None and tally.visits == {7: 10}
    broken = TurnTally(None).feed_all([b'{"error":"Illegal move 3: D4","field":"moves","id":"r"}'])
    assert broken.outcome(200, 1).error == "engine_error"
    assert TurnTally(None).feed_all([b"not json"]).outcome(200, 1).error == "bad_response"
