"""Which turns go to which engine now, and which kgserve holds back (`engine.thread_reserve`, issue 27's slot hog;
issue 33: free for a lone client, many-turn queries turn by turn; issue 36: independent of the crowd).

One Dispatch per pool (every engine's threads, one queue). KataGo searches at most `numAnalysisThreads` turns at
once and never preempts a running search. Per engine (kgserve.engine.reserve):

- the first threads - reserve threads go to anyone, in KataGo's queue order (highest `priority`, then arrival;
  so kgserve's priority classes and fairness levels, kgserve.admission.priority, still order them);
- the last `reserve` threads go to clients holding at most `small` threads per engine (all engines together:
  `small` x the engines ready): a newcomer is answered while another client holds every other thread;
- while no other client has turns waiting here, a client may borrow the reserve as long as a newcomer would wait
  at most `lend_bound_s` for a thread: for a search estimated to end that soon itself (and then `prefetch` turns
  more go into KataGo's own queue: no idle thread between its answer and kgserve's next line), or, for a longer
  search, while another search running on that engine is estimated to end that soon (never past the threads;
  searches that started together lend nothing until their end is near, and a timer looks again then). A client
  alone on the server gets every thread, as with the reserve off, but for the first search's length minus the
  bound after a burst that started together.

Whatever may not go now waits here, per turn: a many-turn query (a whole-game review) is written a few turns at
a time as threads free (kgserve.engine.turns), so it never waits for an idle engine and never keeps other clients
from the engine for longer than one search; a turn goes to whichever engine frees a thread first. Finding the
next turn is O(log clients) (kgserve.engine.heldqueue). Queries without a client key (kgbench's direct sender),
and every query with the reserve off, are written whole at once to the engine with the fewest outstanding visits.

How a query ends, whatever happened to it (kgserve.engine.settle): its unwritten turns are answered as KataGo
answers queued ones (`noResults`), written ones through the engine.

The dispatch holds the turns (the queue, each client's holding, the lending timers); the routers start them
(kgserve.engine.router, seen here only as kgserve.engine.stream.EngineLine) and report back through
kgserve.engine.holder.TurnHolder, which the Dispatch is; its Settler ends queries. Each asks the others through
those contracts, never through their tables.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

from kgserve.engine.errors import EngineDied, NoEngineReady
from kgserve.engine.heldqueue import HeldQueue
from kgserve.engine.lending import has_room, lend_after, next_for
from kgserve.engine.reserve import ThreadReserve
from kgserve.engine.settle import Settler
from kgserve.engine.stream import EngineLine, Piece, QueryStream
from kgserve.engine.turns import plan_turns
from kgserve.katago.protocol import Query

__all__ = ["Dispatch", "preference"]


def preference(router: EngineLine) -> tuple[bool, int, int, int]:
    """Which engine a query goes to first: not suspected of being frozen, fewest outstanding visits and pieces."""
    return (bool(getattr(router.owner, "suspect", False)), router.outstanding_visits, router.pending, router.index)


class Dispatch:
    """Who holds the turns of one pool's queries (kgserve.engine.holder.TurnHolder): which go to which engine now."""

    def __init__(
        self, plan: ThreadReserve | None, routers: Callable[[], Sequence[EngineLine]], *, abort_timeout_s: float = 15.0
    ) -> None:
        self.plan = plan
        self.abort_timeout_s = abort_timeout_s
        self._routers = routers  # the engines that take queries now (ready, not frozen)
        self.holding: dict[str, int] = {}  # turns written and not finished, per client key, all engines
        self.queue = HeldQueue(self._small)
        self.settler = Settler(self.queue, routers, self.gone, abort_timeout_s)  # how each query ends
        self._arrivals = itertools.count(1)
        self._engines = 1  # engines ready at the last look (a client holding little: `small` threads each)
        self._wakes: dict[EngineLine, asyncio.TimerHandle] = {}  # per engine: when the lending rule may allow a turn

    def _small(self, client: str) -> bool:
        return self.plan is not None and self.holding.get(client, 0) < self.plan.small * self._engines

    @property
    def closed(self) -> bool:
        return self.settler.closed

    def _ready(self) -> Sequence[EngineLine]:
        routers = self._routers()
        self._engines = max(1, len(routers))
        return routers

    # -- new queries ---------------------------------------------------------------------------------------
    def submit(self, query: Query, client: str | None, visits: int) -> QueryStream:
        """A new query: written now, or held here until the rule lets its turns go (its client: the per-client
        caps' key; None: never held)."""
        routers = self._ready()
        if not routers or self.closed:
            raise NoEngineReady("no engine is ready" if not self.closed else "the engines are closing")
        stream = QueryStream(self, query, visits, client)
        if self.plan is None or client is None:
            router = min(routers, key=preference) if len(routers) > 1 else routers[0]
            self._write(router, stream, [None], stream.finals_left)
            return stream
        plan = stream.plan = plan_turns(query)
        stream.seq = next(self._arrivals)
        if not self.queue.turns and plan.left == 1:  # the common query, nothing waiting: no queue at all
            small = self._small(client)
            roomy = [router for router in routers if has_room(self.plan, router, small=small, visits=visits)]
            if roomy:
                router = min(roomy, key=preference) if len(roomy) > 1 else roomy[0]
                self._write(router, stream, [plan.take()], stream.finals_left)
                return stream
        self.queue.add(stream)
        self.fill_all()
        return stream

    # -- threads freeing -----------------------------------------------------------------------------------
    def turns_over(self, piece: Piece, turns: int, visits: int) -> None:
        """`turns` of a written piece ended (a final line each, or an error line), having searched `visits`."""
        load = piece.router.load
        load.finished(turns, visits)
        if visits and piece.at_once:
            elapsed = time.monotonic() - piece.written_at
            for _ in range(turns):  # one a final line: a turn
                load.ran(piece.stream.visits_per_turn, elapsed)
        self._release(piece.stream.client, turns)

    def freed(self, router: EngineLine) -> None:
        """Threads of `router`'s engine freed: write what the rule now allows there."""
        if self.queue.turns and router in self._routers():
            self.fill(router)

    def fill_all(self) -> None:
        """Every engine takes what the rule allows (an engine ready again, turns back in the queue)."""
        if self.queue.turns and self.plan is not None and not self.closed:
            for router in sorted(self._ready(), key=preference):
                self.fill(router)

    def fill(self, router: EngineLine) -> None:
        """Write to `router`'s engine the held turns the rule allows now, consecutive turns of one query as one
        piece."""
        if self.plan is None or self.closed:
            return
        streams: dict[int, QueryStream] = {}
        taken: dict[int, list[int | None]] = {}
        costs: dict[int, int] = {}
        while self.queue.turns:
            stream = next_for(self.plan, router, self.queue)
            if stream is None:
                break
            turn = self.queue.take(stream)
            cost = self._cost(stream)
            self._count(router, stream.client, cost)
            key = id(stream)
            if key not in streams:
                streams[key], taken[key], costs[key] = stream, [], 0
            taken[key].append(turn)
            costs[key] += cost
        for key, stream in streams.items():
            router.write(stream, taken[key], costs[key])
        if self.queue.turns:
            self._wake_for_lending(router)

    def _wake_for_lending(self, router: EngineLine) -> None:
        """Turns still held while `router`'s engine has a thread free: if only the lending rule keeps them (a long
        search, no other search near its end yet), look again when it would allow one. No event would: the rule
        changes with time alone."""
        plan = self.plan
        assert plan is not None
        client = self.queue.only_client()
        stream = self.queue.head_of(client) if client is not None else None
        if stream is None or router.load.in_engine >= plan.threads:
            return
        after = lend_after(plan, router, stream.visits_per_turn)
        if not after:  # None: waiting changes nothing; 0: it was not the rule that kept them
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (the rule's own tests): they fill by hand
            return
        when = loop.time() + after + 0.001
        handle = self._wakes.get(router)
        if handle is not None:
            if handle.when() <= when:
                return
            handle.cancel()
        self._wakes[router] = loop.call_at(when, self._woken, router)

    def _woken(self, router: EngineLine) -> None:
        self._wakes.pop(router, None)
        self.freed(router)

    @staticmethod
    def _cost(stream: QueryStream) -> int:
        """Threads one take of the stream holds: a turn, or the whole query's turns when it is not split."""
        return 1 if stream.plan is not None and stream.plan.split else stream.finals_left

    # -- counting ------------------------------------------------------------------------------------------
    def _write(self, router: EngineLine, stream: QueryStream, taken: list[int | None], cost: int) -> None:
        self._count(router, stream.client, cost)
        router.write(stream, taken, cost)

    def _count(self, router: EngineLine, client: str | None, turns: int) -> None:
        router.load.add(turns)
        if client is not None and self.plan is not None:
            self.holding[client] = self.holding.get(client, 0) + turns
            self.queue.holding_changed(client)

    def _release(self, client: str | None, turns: int) -> None:
        if client is None or self.plan is None or turns <= 0:
            return
        left = self.holding.get(client, 0) - turns
        if left > 0:
            self.holding[client] = left
        else:
            self.holding.pop(client, None)
        self.queue.holding_changed(client)

    def gone(self, piece: Piece, turns: int) -> None:
        """`turns` of a piece taken off its engine without an answer."""
        piece.router.load.gone(turns)
        self._release(piece.stream.client, turns)

    # -- how queries end (kgserve.engine.settle) --------------------------------------------------------------
    def abort(self, stream: QueryStream, turns: frozenset[int] | None = None) -> None:
        """KataGo `terminate` for the query (only `turns` of it, when given): its last lines still come."""
        self.settler.abort(stream, turns)

    def settle(self, stream: QueryStream, error: BaseException | None) -> None:
        """The query is over (all its lines came, an error line, `error`): nothing more of it is passed on."""
        self.settler.settle(stream, error)

    def engine_gone(self, router: EngineLine, pieces: list[Piece], error: EngineDied) -> None:
        """An engine exited (its router already emptied): its pieces' queries end with `error`."""
        self.settler.engine_gone(router, pieces, error)

    def close(self) -> None:
        """Shutdown (terminate_all): held turns answered as queued ones; the engines answer the written ones."""
        for handle in self._wakes.values():
            handle.cancel()
        self._wakes.clear()
        self.settler.close()

    # -- a frozen engine -----------------------------------------------------------------------------------
    def take_back(self, router: EngineLine) -> int:
        """The pieces a frozen engine has not written a line for go to the other engines (none ready: they stay):
        held again (their turns first in the queue) or, for queries never held, written elsewhere at once."""
        others = [other for other in self._routers() if other is not router]
        if not others:
            return 0
        pieces = router.unstarted()
        for piece in pieces:
            self.gone(piece, piece.finals_left)
            stream = piece.stream
            if stream.plan is not None:
                stream.plan.restore(piece.taken)
                self.queue.add(stream, len(piece.taken))
            else:
                self._write(min(others, key=preference), stream, piece.taken, piece.finals_left)
        self.fill_all()
        return len(pieces)

    # -- what /readyz and /metrics read --------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        streams = {id(stream): stream for stream in self.queue.streams_of()}.values()
        return {
            "held_queries": sum(1 for stream in streams if stream.held),
            "held_turns": self.queue.turns,
            "waiting_clients": len(self.queue),
        }
