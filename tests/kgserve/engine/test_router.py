"""The router's bookkeeping of which pieces the engine has started (kgserve.engine.router, no process)."""

from __future__ import annotations

import json
from typing import Any

from .dispatch_rig import Rig


def _partial(internal: str) -> bytes:
    line: dict[str, Any] = {"id": internal, "isDuringSearch": True, "turnNumber": 0, "moveInfos": [], "rootInfo": {}}
    return json.dumps(line, separators=(",", ":")).encode()  # as KataGo writes it


def test_a_query_whose_partial_line_is_held_back_counts_as_started() -> None:
    # the engine is searching it: a frozen engine's unstarted queries move to another engine, this one must not
    rig = Rig(8, 0.0)
    held = rig.submit("a", "a")
    waiting = rig.submit("a", "b")
    held.partial_gate = lambda size: False  # its client is over its partial-line cap
    router = rig.routers[0]
    router.route(_partial(held.internal_id))
    assert router.counters["partial_dropped"] == 1 and held.started
    assert [piece.stream for piece in router.unstarted()] == [waiting]
