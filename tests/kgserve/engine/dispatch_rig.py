"""A Dispatch over routers that write to lists instead of engines, and answers written by hand: the rule's tests
(tests/kgserve/engine/test_dispatch*.py) without a process."""

from __future__ import annotations

import json
from typing import Any

from kgserve.engine.dispatch import Dispatch
from kgserve.engine.reserve import thread_reserve
from kgserve.engine.router import Router
from kgserve.engine.stream import QueryStream
from tests.helpers.engine_checks import make_query


class FakeEngine:
    def __init__(self, index: int) -> None:
        self.index = index
        self.suspect = False


class Rig:
    """`engines` routers of `threads` threads each behind one Dispatch; `sent[i]`: what engine i was written."""

    def __init__(self, threads: int, share: float, *, lend_s: float = 0.0, engines: int = 1) -> None:
        self.routers: list[Router] = []
        self.ready: list[Router] = []
        self.dispatch = Dispatch(thread_reserve(threads, share, lend_s), lambda: self.ready)
        self.sent: list[list[bytes]] = []
        for index in range(engines):
            sent: list[bytes] = []
            router = Router(
                FakeEngine(index), sent.append, label=f"engine[{index}]", dispatch=self.dispatch, threads=threads
            )
            router.index = index
            self.sent.append(sent)
            self.routers.append(router)
        self.ready[:] = self.routers

    def submit(self, client: str | None, name: str = "q", visits: int = 100, **body: Any) -> QueryStream:
        query = {"id": name, "moves": [["B", "Q4"], ["W", "D4"]], "boardXSize": 19, "boardYSize": 19, **body}
        return self.dispatch.submit(make_query(query), client, visits)

    def written(self, engine: int = 0) -> list[dict[str, Any]]:
        """The analysis lines written to engine `engine` so far (actions left out), parsed."""
        return [doc for doc in (json.loads(line) for line in self.sent[engine]) if "action" not in doc]

    def actions(self, engine: int = 0) -> list[dict[str, Any]]:
        return [doc for doc in (json.loads(line) for line in self.sent[engine]) if "action" in doc]

    def answer(self, stream: QueryStream, turn: int | None = None, engine: int | None = None, **extra: Any) -> None:
        """A final line for one turn of `stream` (its first piece's first turn unless told), as KataGo writes it."""
        piece = stream.pieces[0]
        if turn is None:
            turn = piece.turns[0] if piece.turns else 2
        for candidate in stream.pieces:
            if candidate.turns is None or turn in candidate.turns:
                piece = candidate
                break
        router = piece.router if engine is None else self.routers[engine]
        line = {"id": piece.internal_id, "isDuringSearch": False, "moveInfos": [], "turnNumber": turn, **extra}
        router.route(json.dumps(line, separators=(",", ":"), sort_keys=True).encode())

    def line(self, stream: QueryStream, text: str) -> None:
        """A raw line for `stream`'s first piece, `{id}` standing for its internal id."""
        piece = stream.pieces[0]
        piece.router.route(text.replace("{id}", piece.internal_id).encode())

    def learn(self, seconds_per_visit: float, engine: int = 0) -> None:
        """Give engine `engine` a search-time estimate (as if its searches had taken that long a visit), weighed so
        that the rig's instant answers barely move it, and no run times (the rig answers at once: none learnt)."""
        load = self.routers[engine].load
        load._busy, load._visits = seconds_per_visit * 1e6, 1e6
        load._runs.clear()

    def age(self, seconds: float, engine: int = 0) -> None:
        """Every piece on engine `engine` written `seconds` earlier than it was (its searches that much older)."""
        for piece in self.routers[engine].pieces():
            piece.written_at -= seconds
