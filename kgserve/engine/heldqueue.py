"""The turns kgserve holds back for a thread (kgserve.engine.dispatch), per client, in KataGo's queue order.

Per client a heap of its streams keyed by each one's next turn (-priority, arrival, rank); over the clients two
heaps of their heads: every client's, and those of clients holding little (`small`: the reserve is theirs). A
client whose head or holding changes gets a fresh entry in both (its `version` goes up); an entry of an older
version is skipped when it comes up, and the heaps are rebuilt when stale entries outnumber live ones. So finding
the next turn for a freed thread costs O(log clients), however many clients wait: never a sort of every client's
head (issue 36: 1,488 clients holding one query each). `ops` counts heap operations: the work per answer, which
tests read.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from kgserve.engine.stream import QueryStream
from kgserve.engine.turns import Key

__all__ = ["HeldQueue"]

_Head = tuple[Key, int, str]  # a client's head key, its version, the client


class _Waiting:
    __slots__ = ("heap", "key", "turns", "version")

    def __init__(self, key: str) -> None:
        self.key = key
        self.heap: list[tuple[Key, int, QueryStream]] = []  # (next turn's key, stream's arrival, stream)
        self.turns = 0
        self.version = 0


class HeldQueue:
    def __init__(self, is_small: Callable[[str], bool]) -> None:
        self._is_small = is_small
        self._clients: dict[str, _Waiting] = {}
        self._all: list[_Head] = []
        self._small: list[_Head] = []
        self.turns = 0  # turns held, all clients
        self.ops = 0

    def __len__(self) -> int:
        """Clients with turns held."""
        return len(self._clients)

    def only_client(self) -> str | None:
        """The one client with turns held, if exactly one has."""
        if len(self._clients) != 1:
            return None
        return next(iter(self._clients))

    def add(self, stream: QueryStream, turns: int | None = None) -> None:
        """A stream whose plan has turns to write (`turns` of them came back to it: a frozen engine's; it may be
        in the queue already, and then has two entries: the stale one is dropped when it comes up)."""
        assert stream.plan is not None and stream.client is not None
        waiting = self._clients.get(stream.client)
        if waiting is None:
            waiting = self._clients[stream.client] = _Waiting(stream.client)
        key = stream.plan.head(stream.seq)
        assert key is not None
        heapq.heappush(waiting.heap, (key, stream.seq, stream))
        self.ops += 1
        added = stream.plan.left if turns is None else turns
        waiting.turns += added
        self.turns += added
        self._changed(waiting)

    def best(self, *, small: bool) -> QueryStream | None:
        """The stream whose next turn KataGo would start first, among every client's or small clients' only."""
        heap = self._small if small else self._all
        while heap:
            _, version, client = heap[0]
            waiting = self._clients.get(client)
            if waiting is not None and waiting.version == version and (not small or self._is_small(client)):
                return waiting.heap[0][2]
            heapq.heappop(heap)
            self.ops += 1
        return None

    def head_of(self, client: str) -> QueryStream | None:
        waiting = self._clients.get(client)
        return waiting.heap[0][2] if waiting is not None else None

    def take(self, stream: QueryStream) -> int | None:
        """The next turn of `stream` (a client's head: from best or head_of), taken off to be written."""
        assert stream.plan is not None and stream.client is not None
        waiting = self._clients[stream.client]
        turn = stream.plan.take()
        waiting.turns -= 1
        self.turns -= 1
        self._changed(waiting)
        return turn

    def dropped(self, stream: QueryStream, turns: int) -> None:
        """`turns` of a stream's plan were taken off without being written (terminated, failed)."""
        if turns <= 0 or stream.client is None:
            return
        waiting = self._clients.get(stream.client)
        if waiting is None:
            return
        waiting.turns -= turns
        self.turns -= turns
        self._changed(waiting)

    def holding_changed(self, client: str) -> None:
        """The client's threads in use changed: whether it is small may have."""
        waiting = self._clients.get(client)
        if waiting is not None:
            self._changed(waiting)

    def streams_of(self) -> list[QueryStream]:
        """Every stream with turns held (the queue is being emptied: close, the last engine gone)."""
        return [item[2] for waiting in self._clients.values() for item in sorted(waiting.heap, key=lambda i: i[:2])]

    def _changed(self, waiting: _Waiting) -> None:
        """Its head (a stream's next turn, the stream itself) or its holding changed: fresh entries for it."""
        heap = waiting.heap
        while heap:  # the top stream is live and keyed by its next turn
            key, arrival, stream = heap[0]
            real = stream.plan.head(arrival) if stream.plan is not None and stream.plan.left > 0 else None
            if real == key and not stream.done:
                break
            if real is None or stream.done:
                heapq.heappop(heap)
            else:
                heapq.heapreplace(heap, (real, arrival, stream))
            self.ops += 1
        if not heap or waiting.turns <= 0:
            del self._clients[waiting.key]
            return
        waiting.version += 1
        entry = (heap[0][0], waiting.version, waiting.key)
        heapq.heappush(self._all, entry)
        self.ops += 1
        if self._is_small(waiting.key):
            heapq.heappush(self._small, entry)
            self.ops += 1
        if len(self._all) > 4 * len(self._clients) + 64:
            self._rebuild()

    def _rebuild(self) -> None:
        """Only the live entries (amortised: after as many stale ones as live)."""
        self._all = [(w.heap[0][0], w.version, w.key) for w in self._clients.values()]
        self._small = [entry for entry in self._all if self._is_small(entry[2])]
        heapq.heapify(self._all)
        heapq.heapify(self._small)
        self.ops += len(self._all)
