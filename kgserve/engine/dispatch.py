"""Which of an engine's queries go to KataGo now and which kgserve holds back (`engine.thread_reserve`, issue 27's
slot hog).

KataGo searches at most `numAnalysisThreads` turns at once and never preempts a running search: once one client's
queries hold every analysis thread, anyone else's query waits for one of them to finish, however long that takes,
and no priority can help (nothing turns over). So, per engine, the last `reserve` threads go only to clients holding
at most `small` of that engine's threads, as the memory budget keeps its last 1/8 for clients holding little
(kgserve.admission.budget). Nothing past the engine's threads is written to it either: a query there would wait in
KataGo's own queue, first come first served, where no reserve reaches it. Such queries are held back here and
written as soon as the rule allows (a thread freeing), in the order KataGo's queue would have taken them: the
highest `priority` first, then the first come (so kgserve's priority classes and fairness levels,
kgserve.admission.priority, still order them).

A thread is one analysed turn not yet finished (KataGo searches each turn of a query as a task of its own). Queries
without a client key (kgbench's direct sender) are counted but never held. An engine with nothing running takes
the next query whatever its size, so a query of more turns than threads is never stuck.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

from kgserve.engine.stream import QueryStream
from kgserve.katago.priorities import read_priorities, read_priority

__all__ = ["Dispatch", "ThreadReserve", "thread_reserve"]


@dataclass(frozen=True, slots=True)
class ThreadReserve:
    threads: int  # the engine's numAnalysisThreads
    reserve: int  # the last threads, only for clients holding at most `small`
    small: int


def thread_reserve(threads: int | None, share: float) -> ThreadReserve | None:
    """The reserve for an engine of `threads` analysis threads (None: off, or nothing to reserve).

    reserve = share x threads, at least 1 and never every thread; `small` = reserve: a newcomer may take the whole
    reserve (a short burst of queries is answered at once), while a client already holding more than that has had
    its turn. With 128 threads and the default 1/16: 8 threads, for clients holding at most 8."""
    if threads is None or threads < 2 or share <= 0:
        return None
    reserve = min(threads - 1, max(1, round(threads * share)))
    return ThreadReserve(threads, reserve, reserve)


class Dispatch:
    """One engine's threads in use (per client) and its held-back queries. It writes nothing: `admit` and
    `ready` say which queries the router may write now, and the router reports turns finished with `release`."""

    def __init__(self, plan: ThreadReserve | None) -> None:
        self.plan = plan
        self.in_engine = 0  # turns written and not finished (running, or queued inside KataGo)
        self.held = 0  # queries held back here
        self._holding: dict[str, int] = {}  # turns in the engine per client key
        # per client, a heap of (-priority, arrival, stream): its next query to write first
        self._waiting: dict[str, list[tuple[int, int, QueryStream]]] = {}
        self._arrivals = itertools.count()

    def admit(self, stream: QueryStream) -> bool:
        """A new query: True when it may be written now (it is counted), False when it is held back."""
        key = stream.client
        if self.plan is None or key is None or (key not in self._waiting and self._may_run(key, stream.finals_left)):
            self._count(stream)
            return True
        heapq.heappush(self._waiting.setdefault(key, []), (-_priority(stream), next(self._arrivals), stream))
        stream.held = True
        self.held += 1
        return False

    def release(self, stream: QueryStream, turns: int) -> None:
        """`turns` of a written query are over (its final lines, or it ended)."""
        turns = min(turns, stream.running_turns)
        if turns <= 0:
            return
        stream.running_turns -= turns
        self.in_engine -= turns
        key = stream.client
        if key is not None:
            left = self._holding.get(key, 0) - turns
            if left > 0:
                self._holding[key] = left
            else:
                self._holding.pop(key, None)

    def forget(self, stream: QueryStream) -> None:
        """A held-back query leaves without being written (terminated, the engine gone, moved elsewhere)."""
        queue = self._waiting.get(stream.client or "")
        if not stream.held or queue is None:
            return
        for item in queue:
            if item[2] is stream:
                queue.remove(item)
                heapq.heapify(queue)
                break
        if not queue:
            del self._waiting[stream.client or ""]
        stream.held = False
        self.held -= 1

    def drop_held(self) -> list[QueryStream]:
        """Every held-back query, taken off (the engine is closing or gone)."""
        streams = [item[2] for queue in self._waiting.values() for item in sorted(queue)]
        for stream in streams:
            stream.held = False
        self._waiting.clear()
        self.held = 0
        return streams

    def ready(self) -> list[QueryStream]:
        """Held-back queries that may be written now, taken off and counted: the first head of a client's queue
        (highest priority, then arrival) that the rule allows first, until none is allowed."""
        taken: list[QueryStream] = []
        while self._waiting:
            heads = sorted((queue[0][:2], key) for key, queue in self._waiting.items())
            key = next((key for _, key in heads if self._may_run(key, self._waiting[key][0][2].finals_left)), None)
            if key is None:
                break
            queue = self._waiting[key]
            stream = heapq.heappop(queue)[2]
            if not queue:
                del self._waiting[key]
            stream.held = False
            self.held -= 1
            self._count(stream)
            taken.append(stream)
        return taken

    def _may_run(self, key: str, turns: int) -> bool:
        plan = self.plan
        if plan is None or self.in_engine == 0:
            return True
        after = self.in_engine + min(turns, plan.threads)
        if after <= plan.threads - plan.reserve:
            return True
        return after <= plan.threads and self._holding.get(key, 0) + turns <= plan.small

    def _count(self, stream: QueryStream) -> None:
        turns = stream.finals_left
        stream.running_turns = turns
        self.in_engine += turns
        if stream.client is not None:
            self._holding[stream.client] = self._holding.get(stream.client, 0) + turns


def _priority(stream: QueryStream) -> int:
    """The priority KataGo would queue the query with (`priorities`, one per turn: its highest), 0 when unset."""
    body = stream.query.body
    several = read_priorities(body["priorities"]) if "priorities" in body else None
    if several:
        return max(several)
    return read_priority(body.get("priority", 0)) or 0
