"""kgserve.batch.answers: which lines a row keeps, which failures are tried again, and how long it waits."""

from __future__ import annotations

import pytest

from kgserve.batch.answers import Backoff, RetryLater, answer_of, gave_up, keep_lines

FINAL = b'{"id":"q","isDuringSearch":false,"moveInfos":[],"rootInfo":{"visits":8},"turnNumber":0}'
PARTIAL = b'{"id":"q","isDuringSearch":true,"moveInfos":[],"rootInfo":{"visits":3},"turnNumber":0}'
ILLEGAL = b'{"error":"Illegal move 2: E5","field":"moves","id":"q"}'
DIED = b'{"error":"engine died before finishing this query: killed by signal 9","id":"q"}'


def test_partial_lines_are_dropped_and_katagos_error_is_an_answer() -> None:
    assert keep_lines([PARTIAL, FINAL]) == [FINAL]
    assert answer_of([PARTIAL, FINAL]).error is None
    answer = answer_of([ILLEGAL])
    assert answer.lines == (ILLEGAL,) and answer.error == "moves: Illegal move 2: E5"


def test_a_query_cut_short_or_incomplete_is_tried_again() -> None:
    with pytest.raises(RetryLater, match="engine died"):
        answer_of([PARTIAL, DIED])
    with pytest.raises(RetryLater, match="1 of 2 final lines"):
        answer_of([FINAL], finals=2)


def test_retry_after_is_honoured_with_jitter_and_the_back_off_is_capped() -> None:
    backoff = Backoff(base_s=0.25, cap_s=10.0)
    waits = [backoff.delay(3, retry_after_s=2.0) for _ in range(200)]
    assert all(2.0 <= wait <= 2.5 for wait in waits) and len(set(waits)) > 1
    assert all(0 <= backoff.delay(40) <= 10.0 for _ in range(200))
    assert max(backoff.delay(0) for _ in range(200)) <= 0.25


def test_giving_up_names_why_and_the_row() -> None:
    answer = gave_up("g.sgf:3", 30, "HTTP 503")
    assert answer.lines == (b'{"error":"batch: gave up after 30 attempts: HTTP 503","id":"g.sgf:3"}',)
    assert answer.error == "batch: gave up after 30 attempts"
