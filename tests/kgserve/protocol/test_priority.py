"""kgserve.admission.priority: classes map onto KataGo priorities, interactive always above batch."""

from __future__ import annotations

import json
from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kgserve.admission.priority import (
    BAND,
    CLASS_OFFSET,
    PriorityClass,
    UnknownClass,
    apply_class,
    class_priority,
    parse_class,
)
from kgserve.katago.protocol import Query, classify_line, engine_line

KATAGO_LIMIT = 0x3FFFFFFFFFFFFFFF  # KataGo refuses priorities beyond +-(2^62 - 1)


def query(text: str) -> Query:
    item = classify_line(text.encode())
    assert isinstance(item, Query)
    return item


def test_parse_class() -> None:
    assert parse_class(None, "batch") == "batch"
    assert parse_class("  ", "interactive") == "interactive"
    assert parse_class("Interactive", "batch") == "interactive"
    with pytest.raises(UnknownClass, match="'interactive' or 'batch'"):
        parse_class("urgent", "batch")


@given(st.integers(-KATAGO_LIMIT, KATAGO_LIMIT), st.integers(-KATAGO_LIMIT, KATAGO_LIMIT))
def test_every_interactive_priority_is_above_every_batch_one(interactive: int, batch: int) -> None:
    high = class_priority("interactive", interactive)
    low = class_priority("batch", batch)
    assert high > low
    assert low >= -KATAGO_LIMIT and high <= KATAGO_LIMIT


@given(st.integers(-BAND, BAND), st.integers(-BAND, BAND))
def test_a_callers_own_order_is_kept_inside_its_band(a: int, b: int) -> None:
    for klass in get_args(PriorityClass):
        assert (class_priority(klass, a) < class_priority(klass, b)) == (a < b)


def test_apply_class_rewrites_priority_and_priorities() -> None:
    plain = query('{"id":"a","moves":[]}')
    assert apply_class(plain, "batch") is plain  # nothing to add: KataGo's default is 0
    assert apply_class(plain, "interactive").body["priority"] == CLASS_OFFSET["interactive"]
    own = apply_class(query('{"id":"a","moves":[],"priority":3}'), "interactive")
    assert own.body["priority"] == CLASS_OFFSET["interactive"] + 3 and own.caller_id == "a"
    turns = apply_class(query('{"id":"a","analyzeTurns":[0,1],"priorities":[1,-2]}'), "interactive")
    assert turns.body["priorities"] == [CLASS_OFFSET["interactive"] + 1, CLASS_OFFSET["interactive"] - 2]
    assert "priority" not in turns.body


@pytest.mark.parametrize(
    "text",
    [
        '{"id":"a","priority":"high"}',
        '{"id":"a","priority":1.5}',
        '{"id":"a","priority":true}',
        '{"id":"a","priority":1,"priorities":[1]}',
        '{"id":"a","priority":18446744073709551616}',
        '{"id":"a","priority":4611686018427387904}',
        '{"id":"a","analyzeTurns":[0],"priorities":[true]}',
        '{"id":"a","analyzeTurns":[0],"priorities":[4.7e18]}',
        '{"id":"a","analyzeTurns":[0],"priorities":[1e300]}',
    ],
)
def test_values_katago_refuses_are_left_for_katago(text: str) -> None:
    original = query(text)
    assert apply_class(original, "interactive") is original


@pytest.mark.parametrize(
    ("text", "klass", "read"),
    [
        # what KataGo v1.17.2 reads (kgserve.katago.priorities): floats truncate, a uint64 wraps, the band clamps
        ('{"id":"a","analyzeTurns":[0,1],"priorities":[4.0e18,1.9]}', "batch", [BAND, 1]),
        ('{"id":"a","analyzeTurns":[0],"priorities":[-4.0e18]}', "interactive", [-BAND]),
        ('{"id":"a","analyzeTurns":[0],"priorities":[18446744073709551615]}', "batch", [-1]),
        ('{"id":"a","priority":18446744073709551615}', "interactive", -1),
        ('{"id":"a","priority":-4611686018427387903}', "batch", -BAND),
        ('{"id":"a","priority":4611686018427387903}', "batch", BAND),
    ],
)
def test_every_value_katago_accepts_lands_in_its_class_band(text: str, klass: PriorityClass, read: object) -> None:
    mapped = apply_class(query(text), klass)
    offset = CLASS_OFFSET[klass]
    if isinstance(read, list):
        assert mapped.body["priorities"] == [offset + value for value in read]
    else:
        assert mapped.body["priority"] == offset + read
    # the engine gets the mapped value: appended to the client's own bytes, the last of the duplicate keys
    sent = json.loads(engine_line(mapped, "kgq1"))
    assert (
        sent["priorities" if isinstance(read, list) else "priority"]
        == mapped.body["priorities" if isinstance(read, list) else "priority"]
    )


@given(st.lists(st.one_of(st.floats(-4.6e18, 4.6e18), st.integers(-(2**64), 2**64)), min_size=1, max_size=4))
def test_no_batch_priority_katago_accepts_outranks_an_interactive_one(values: list[float | int]) -> None:
    from kgserve.katago.priorities import read_priorities

    text = json.dumps({"id": "a", "analyzeTurns": list(range(len(values))), "priorities": values})
    batch = apply_class(query(text), "batch")
    if read_priorities(query(text).body["priorities"]) is None:
        return  # KataGo refuses it: its own error line
    lowest_interactive = class_priority("interactive", -KATAGO_LIMIT)
    assert all(-BAND <= value <= BAND < lowest_interactive for value in batch.body["priorities"])
