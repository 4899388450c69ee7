"""kgserve.admission.priority's levels: inside its class a query steps down one level per query its client already
has in flight there, so every client's first query outranks anyone's second; the classes never overlap."""

from __future__ import annotations

import json
from typing import get_args

from hypothesis import given
from hypothesis import strategies as st

from kgserve.admission.priority import (
    BAND,
    LEVELS,
    PriorityClass,
    apply_class,
    apply_classes,
    class_priority,
    fairness_levels,
    own_priority,
    request_levels,
)
from kgserve.katago.priorities import PRIORITY_LIMIT
from kgserve.katago.protocol import Query, classify_line, engine_line

levels = st.integers(0, LEVELS + 100)
owns = st.integers(-PRIORITY_LIMIT, PRIORITY_LIMIT)


def query(text: str) -> Query:
    item = classify_line(text.encode())
    assert isinstance(item, Query)
    return item


def sent(mapped: Query) -> dict[str, object]:
    """What the engine reads from the line kgserve writes (the last of duplicate keys, as KataGo and Python do)."""
    parsed: dict[str, object] = json.loads(engine_line(mapped, "kgq1"))
    return parsed


@given(owns, levels, owns, levels)
def test_no_level_or_priority_lets_batch_reach_interactive(own_i: int, level_i: int, own_b: int, level_b: int) -> None:
    high = class_priority("interactive", own_i, level_i)
    low = class_priority("batch", own_b, level_b)
    assert -PRIORITY_LIMIT <= low < high <= PRIORITY_LIMIT


@given(owns, owns, st.integers(0, LEVELS - 2), st.integers(1, LEVELS))
def test_a_lower_level_outranks_a_higher_one_whatever_the_priorities(a: int, b: int, level: int, more: int) -> None:
    for klass in get_args(PriorityClass):
        assert class_priority(klass, a, level) > class_priority(klass, b, min(level + more, LEVELS - 1))


@given(st.integers(-BAND, BAND), st.integers(-BAND, BAND), levels)
def test_at_one_level_the_callers_own_order_is_kept(a: int, b: int, level: int) -> None:
    for klass in get_args(PriorityClass):
        assert (class_priority(klass, a, level) < class_priority(klass, b, level)) == (a < b)


def test_level_zero_is_the_class_band_as_before() -> None:
    assert class_priority("batch", 7) == 7 and class_priority("batch", 7, 0) == 7
    plain = query('{"id":"a","moves":[]}')
    assert apply_class(plain, "batch", 0) is plain  # the hot path's common case: the client's bytes, untouched
    assert class_priority("batch", 0, LEVELS + 5) == class_priority("batch", 0, LEVELS - 1)  # the lowest level


@given(st.lists(st.integers(-5, 5), max_size=20), st.integers(0, 600))
def test_a_requests_levels_follow_the_order_katago_would_start_it(own: list[int], base: int) -> None:
    mapped = request_levels(own, base)
    assert sorted(mapped) == list(range(base, base + len(own)))
    katago_order = sorted(range(len(own)), key=lambda index: (-own[index], index))
    assert sorted(range(len(own)), key=lambda index: mapped[index]) == katago_order


def test_own_priority_reads_what_katago_reads() -> None:
    assert own_priority(query('{"id":"a"}')) == 0
    assert own_priority(query('{"id":"a","priority":18446744073709551615}')) == -1  # a uint64 wraps
    assert own_priority(query('{"id":"a","priority":1.5}')) == 0  # refused by KataGo: no order to keep
    assert own_priority(query('{"id":"a","analyzeTurns":[0,1],"priorities":[3,9.7]}')) == 9


def test_levels_reach_the_engine_appended_to_the_clients_own_bytes() -> None:
    original = query('{"id":"a","moves":[["B","Q4"]],"priority":3}')
    mapped = apply_class(original, "batch", 2)
    assert mapped.raw is not None and mapped.raw.startswith(original.raw[:-1])  # type: ignore[index]
    assert sent(mapped)["priority"] == class_priority("batch", 3, 2) == mapped.body["priority"]
    turns = apply_class(query('{"id":"a","analyzeTurns":[0,1],"priorities":[4.0e18, -1]}'), "interactive", 1)
    assert sent(turns)["priorities"] == [class_priority("interactive", BAND, 1), class_priority("interactive", -1, 1)]
    refused = query('{"id":"a","priority":true}')
    assert apply_class(refused, "batch", 9) is refused  # KataGo's own error line, whatever the level


def test_apply_classes_continues_the_clients_levels_per_class() -> None:
    queries = [query(json.dumps({"id": name, "priority": own})) for name, own in (("a", 0), ("b", 5), ("c", 0))]
    classes: list[PriorityClass] = ["batch", "batch", "interactive"]
    mapped = apply_classes(queries, classes, fairness_levels(10, 4, enabled=True))
    # batch: 6 in flight before; b (priority 5) first at level 6, then a at level 7; interactive: 4 before
    assert [each.body["priority"] for each in mapped] == [
        class_priority("batch", 0, 7),
        class_priority("batch", 5, 6),
        class_priority("interactive", 0, 4),
    ]
    assert fairness_levels(10, 4, enabled=False) is None  # priority.fairness false: no levels
    unfair = apply_classes(queries, classes, None)  # every query at level 0
    assert [each.body["priority"] for each in unfair] == [0, 5, class_priority("interactive", 0)]
    assert unfair[0] is queries[0]
