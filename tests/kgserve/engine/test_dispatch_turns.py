"""A many-turn query through kgserve.engine.dispatch (no process): written turn by turn as threads free, its lines
back byte for byte, every turn settled once whatever ends it; held turns go to the engine that frees first."""

from __future__ import annotations

import asyncio
import json

import pytest

from kgserve.engine.errors import EngineDied
from kgserve.engine.stream import QueryStream

from .dispatch_rig import Rig

MOVES = [["B", "Q4"], ["W", "D4"], ["B", "Q16"], ["W", "D16"], ["B", "C3"], ["W", "R17"]]


def _review(rig: Rig, client: str = "r", name: str = "review", turns: list[int] | None = None, **body: object):  # type: ignore[no-untyped-def]
    return rig.submit(client, name, moves=MOVES, analyzeTurns=turns if turns is not None else list(range(7)), **body)


def _lines(stream: QueryStream) -> list[bytes]:
    items = stream._items
    out = []
    while items is not None and not items.empty():
        item = items.get_nowait()
        if isinstance(item, bytes):
            out.append(item)
    return out


def test_a_review_is_written_as_threads_free_and_its_lines_come_back_unchanged() -> None:
    rig = Rig(4, 0.25)  # 3 open threads, nothing lent (no estimate)
    review = _review(rig)
    first = rig.written()
    assert len(first) == 1 and first[0]["analyzeTurns"] == [0, 1, 2] and first[0]["id"].startswith("kgq")
    assert rig.sent[0][0].startswith(b'{"id": "review"')
    assert rig.sent[0][0].endswith(b'],"analyzeTurns":[0,1,2],"id":"%s"}\n' % first[0]["id"].encode())
    for turn in range(7):
        rig.answer(review, turn)
    assert [doc["analyzeTurns"] for doc in rig.written()] == [[0, 1, 2], [3], [4], [5], [6]]
    assert review.done and _lines(review) == [
        b'{"id":"review","isDuringSearch":false,"moveInfos":[],"turnNumber":%d}' % turn for turn in range(7)
    ]
    assert rig.routers[0].load.in_engine == 0 and rig.dispatch.holding == {}


def test_priorities_go_with_their_turns_and_order_them() -> None:
    rig = Rig(2, 0.5)  # one open thread
    review = _review(rig, turns=[1, 2, 3], priorities=[1, 9, 5])
    for _ in range(3):
        (last,) = rig.written()[-1:]
        rig.answer(review, last["analyzeTurns"][0])
    assert [(doc["analyzeTurns"], doc["priorities"]) for doc in rig.written()] == [([2], [9]), ([3], [5]), ([1], [1])]


@pytest.mark.parametrize(
    "body",
    [
        {"analyzeTurns": [0, 1, 9]},  # past the moves: KataGo's "Invalid turn number" for the whole query
        {"analyzeTurns": [0, 1], "priorities": [1]},  # not as long as analyzeTurns
        {"analyzeTurns": [0, 1], "priorities": [1, 2], "priority": 3},  # both
        {"analyzeTurns": [0, "x"]},
    ],
)
def test_a_query_katago_will_refuse_goes_whole(body: dict[str, object]) -> None:
    rig = Rig(4, 0.25)
    stream = rig.submit("r", "bad", moves=MOVES, **body)
    (written,) = rig.written()
    assert written["analyzeTurns"] == body["analyzeTurns"] and not stream.held
    rig.line(stream, '{"error":"Invalid turn number: 9","field":"analyzeTurns","id":"{id}"}')
    assert stream.done and _lines(stream) == [b'{"error":"Invalid turn number: 9","field":"analyzeTurns","id":"bad"}']


async def test_terminating_a_review_answers_its_unwritten_turns_at_once_and_the_engine_the_rest() -> None:
    rig = Rig(4, 0.25)
    review = _review(rig)
    review.owner.abort(review)
    assert _lines(review) == [
        b'{"id":"review","isDuringSearch":false,"noResults":true,"turnNumber":%d}' % turn for turn in range(3, 7)
    ]
    (terminate,) = rig.actions()
    assert terminate["terminateId"] == rig.written()[0]["id"] and "turnNumbers" not in terminate
    for turn in range(3):
        rig.answer(review, turn)
    assert review.done and review.error is None and rig.routers[0].load.in_engine == 0
    assert rig.dispatch.queue.turns == 0


async def test_terminating_some_turns_of_a_review() -> None:
    rig = Rig(4, 0.25)
    review = _review(rig)
    review.owner.abort(review, frozenset({1, 5, 9}))
    assert _lines(review) == [b'{"id":"review","isDuringSearch":false,"noResults":true,"turnNumber":5}']
    (terminate,) = rig.actions()
    assert terminate["turnNumbers"] == [1] and terminate["terminateId"] == rig.written()[0]["id"]
    for turn in (0, 1, 2, 3, 4, 6):
        rig.answer(review, turn)
    assert review.done and [doc["analyzeTurns"] for doc in rig.written()] == [[0, 1, 2], [3], [4], [6]]


def test_an_error_line_ends_the_query_once_and_a_warning_comes_once() -> None:
    rig = Rig(4, 0.25)
    review = _review(rig, turns=[0, 1, 2, 3, 0])  # 4 distinct turns: [0, 1, 2] written, 3 held
    first = review.pieces[0]
    warning = '{"field":"bogus","id":"%s","warning":"Unexpected or unused field"}'
    rig.routers[0].route((warning % first.internal_id).encode())
    rig.answer(review, 0)
    second = review.pieces[-1]
    assert second.turns == [3]
    rig.routers[0].route((warning % second.internal_id).encode())  # KataGo warns for each piece: passed once
    rig.routers[0].route(b'{"error":"bad","field":"rules","id":"%s"}' % first.internal_id.encode())
    rig.routers[0].route(b'{"error":"bad","field":"rules","id":"%s"}' % second.internal_id.encode())
    assert review.done and _lines(review) == [
        b'{"field":"bogus","id":"review","warning":"Unexpected or unused field"}',
        b'{"id":"review","isDuringSearch":false,"moveInfos":[],"turnNumber":0}',
        b'{"error":"bad","field":"rules","id":"review"}',
    ]
    assert (
        rig.routers[0].pending == 0 and rig.routers[0].load.in_engine == 0 and rig.routers[0].counters["unrouted"] == 0
    )


def test_held_turns_go_to_the_engine_that_frees_a_thread_first() -> None:
    rig = Rig(2, 0.5, engines=2)  # one open thread each
    first = [rig.submit("a", f"a{index}") for index in range(2)]
    assert {stream.engine.index for stream in first} == {0, 1}
    held = rig.submit("a", "held")
    assert held.held
    rig.answer(first[1])  # engine 1 frees first
    assert not held.held and held.engine.index == 1
    review = _review(rig, "b")  # a newcomer's review: the reserved thread of each engine
    assert sorted(piece.router.index for piece in review.pieces) == [0, 1]


def test_a_frozen_engines_unstarted_turns_go_back_to_the_queue_first() -> None:
    rig = Rig(4, 0.25, engines=2)
    review = _review(rig)
    assert sorted(len(piece.turns or []) for piece in review.pieces) == [3, 3]
    rig.ready.remove(rig.routers[0])  # frozen: it takes no query
    assert rig.dispatch.take_back(rig.routers[0]) == 1
    # its three turns went back and engine 1 has no free thread: they wait, first in line
    assert review.plan is not None and review.plan.left == 4
    assert rig.actions(0)[0]["action"] == "terminate"
    piece_on_1 = next(piece for piece in review.pieces if piece.router is rig.routers[1])
    assert piece_on_1.turns is not None
    rig.answer(review, piece_on_1.turns[0])
    assert rig.written(1)[-1]["analyzeTurns"] == review.pieces[-1].turns


async def test_an_engines_death_ends_its_queries_and_orphans_their_other_pieces() -> None:
    rig = Rig(4, 0.25, engines=2)
    review = _review(rig)
    error = EngineDied("engine[0] died", exit_code=-9)
    rig.ready.remove(rig.routers[0])
    rig.routers[0].fail_all(error)
    assert review.done and review.error is error
    (terminate,) = rig.actions(1)
    assert terminate["action"] == "terminate" and rig.routers[1].pending == 1  # its lines still come: dropped
    piece = next(iter(rig.routers[1]._pieces.values()))
    for turn in piece.turns or []:
        line = {"id": piece.internal_id, "isDuringSearch": False, "noResults": True, "turnNumber": turn}
        rig.routers[1].route(json.dumps(line, separators=(",", ":")).encode())
    assert rig.routers[1].pending == 0 and rig.routers[1].load.in_engine == 0 and rig.dispatch.holding == {}
    await asyncio.sleep(0)
