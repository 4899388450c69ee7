"""A many-turn query written turn by turn (kgserve.engine.turns, the thread reserve on) against the real KataGo: the
client gets what KataGo prints for the whole query: one final line per turn with the same keys, KataGo's own
error line once, its warning once, `noResults` for the turns a terminate finds unwritten, and `priorities` taken.
Each case is sent twice: whole (no client key: never split) and split (a client key)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kgserve.engine.pool import EnginePool
from tests.helpers.engine_checks import kinds, make_query, ready_pool
from tests.katago.conftest import RealKatago, tier_settings

pytestmark = pytest.mark.katago

MOVES = [["B", "Q4"], ["W", "D4"], ["B", "Q16"], ["W", "D16"], ["B", "C3"], ["W", "R17"], ["B", "C16"], ["W", "P3"]]
REVIEW: dict[str, Any] = {
    "id": "review",
    "moves": MOVES,
    "rules": "chinese",
    "komi": 7.5,
    "boardXSize": 19,
    "boardYSize": 19,
    "maxVisits": 8,
    "analyzeTurns": list(range(len(MOVES) + 1)),
}


@pytest.fixture
async def engine_pool(tmp_path: Path, real_katago: RealKatago) -> AsyncIterator[EnginePool]:
    async with ready_pool(tier_settings(tmp_path, real_katago, engine={"thread_reserve": 0.25})) as pool:
        yield pool


async def _both(pool: EnginePool, body: dict[str, Any]) -> tuple[list[bytes], list[bytes]]:
    """The query's lines whole (no client: written at once) and split (a client key), in that order."""
    whole = await asyncio.wait_for(pool.submit(make_query(body)).collect(), 60)
    stream = pool.submit(make_query(body), "10.0.0.9")
    assert len(stream.pieces) == 1 and stream.plan is not None and stream.plan.split  # 3 of 9 turns at first
    split = await asyncio.wait_for(stream.collect(), 60)
    return whole, split


def _shape(lines: list[bytes]) -> list[tuple[Any, ...]]:
    """Each line's id, turn, kind and keys in order (the numbers of a search differ from run to run)."""
    shaped = []
    for line in lines:
        doc = json.loads(line)
        shaped.append((doc.get("id"), doc.get("turnNumber"), doc.get("isDuringSearch"), tuple(doc)))
    return sorted(shaped, key=repr)


async def test_a_review_split_into_pieces_answers_as_the_whole_query(engine_pool: EnginePool) -> None:
    whole, split = await _both(engine_pool, REVIEW)
    assert kinds(split) == ["final"] * 9 and _shape(split) == _shape(whole)
    assert sorted(json.loads(line)["turnNumber"] for line in split) == list(range(9))


async def test_partial_lines_and_priorities_per_turn(engine_pool: EnginePool) -> None:
    body = {**REVIEW, "maxVisits": 200, "reportDuringSearchEvery": 0.02, "priorities": list(range(9))}
    whole, split = await _both(engine_pool, body)
    assert {json.loads(line)["turnNumber"] for line in split if kinds([line]) == ["final"]} == set(range(9))
    assert {tuple(json.loads(line)) for line in split} == {tuple(json.loads(line)) for line in whole}


@pytest.mark.parametrize(
    "change",
    [{"rules": "bogus-rules"}, {"moves": [*MOVES[:-1], ["W", "Q4"]]}],
    ids=["rules", "illegal-move"],
)
async def test_katagos_error_line_comes_once(engine_pool: EnginePool, change: dict[str, Any]) -> None:
    whole, split = await _both(engine_pool, {**REVIEW, **change})
    assert kinds(whole) == ["error"] and split == whole


async def test_katagos_warning_comes_once(engine_pool: EnginePool) -> None:
    whole, split = await _both(engine_pool, {**REVIEW, "bogusField": 1})
    assert kinds(whole)[0] == "warning" and kinds(split).count("warning") == 1 and split[0] == whole[0]
    assert _shape(split) == _shape(whole)


async def test_a_terminated_review_settles_every_turn_once(engine_pool: EnginePool) -> None:
    stream = engine_pool.submit(make_query({**REVIEW, "maxVisits": 10_000_000}), "10.0.0.9")
    await asyncio.sleep(0.5)
    engine_pool.abort(stream)
    lines = [json.loads(line) for line in await asyncio.wait_for(stream.collect(), 60)]
    assert sorted(line["turnNumber"] for line in lines) == list(range(9))
    unwritten = [line for line in lines if line.get("noResults")]
    assert unwritten and all(line == {**line, "isDuringSearch": False, "id": "review"} for line in lines)
    assert all("moveInfos" in line for line in lines if not line.get("noResults"))
    assert engine_pool.status()["engines"][0]["outstanding_visits"] == 0
