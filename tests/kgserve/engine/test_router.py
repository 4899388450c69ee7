"""The router's bookkeeping of which queries the engine has started (kgserve.engine.router, no process)."""

from __future__ import annotations

import json
from typing import Any

from kgserve.engine.router import Router
from tests.helpers.engine_checks import make_query


def _router() -> tuple[Router, list[bytes]]:
    sent: list[bytes] = []
    router = Router(object(), sent.append, label="engine[t]", default_visits=10, abort_timeout_s=1.0)  # type: ignore[arg-type]
    return router, sent


def _partial(internal: str) -> bytes:
    line: dict[str, Any] = {"id": internal, "isDuringSearch": True, "turnNumber": 0, "moveInfos": [], "rootInfo": {}}
    return json.dumps(line, separators=(",", ":")).encode()  # as KataGo writes it


def test_a_query_whose_partial_line_is_held_back_counts_as_started() -> None:
    # the engine is searching it: a frozen engine's unstarted queries move to another engine, this one must not
    router, _ = _router()
    held = router.submit(make_query({"id": "a", "moves": [], "rules": "tromp-taylor", "boardXSize": 9,
                                     "boardYSize": 9, "maxVisits": 100}))  # fmt: skip
    waiting = router.submit(make_query({"id": "b", "moves": [], "rules": "tromp-taylor", "boardXSize": 9,
                                        "boardYSize": 9, "maxVisits": 100}))  # fmt: skip
    held.partial_gate = lambda size: False  # its client is over its partial-line cap
    router.route(_partial(held.internal_id))
    assert router.counters["partial_dropped"] == 1 and held.started
    assert router.detach_unstarted() == [waiting]
