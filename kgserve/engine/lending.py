"""The thread reserve's rule for one engine (kgserve.engine.reserve has its sizes): whether a turn may go to the
engine now, and when a reserved thread may be lent. Plain functions of the plan, the engine's line and the held
queue: kgserve.engine.dispatch applies them and owns every state they read; nothing here changes anything.
"""

from __future__ import annotations

import time

from kgserve.engine.heldqueue import HeldQueue
from kgserve.engine.reserve import ThreadReserve
from kgserve.engine.stream import EngineLine, QueryStream

__all__ = ["has_room", "lend_after", "next_for"]


def next_for(plan: ThreadReserve, line: EngineLine, queue: HeldQueue) -> QueryStream | None:
    """The held stream whose next turn the rule lets `line`'s engine take now, if any."""
    running = line.load.in_engine
    if running < plan.threads - plan.reserve:
        return queue.best(small=False)
    if running < plan.threads:
        small = queue.best(small=True)
        if small is not None:
            return small
    if running < plan.threads + plan.prefetch:
        client = queue.only_client()
        stream = queue.head_of(client) if client is not None else None
        if stream is not None and lend_after(plan, line, stream.visits_per_turn) == 0.0:
            return stream
    return None


def has_room(plan: ThreadReserve, line: EngineLine, *, small: bool, visits: int) -> bool:
    """Whether one more turn of a client (`small`: holding little) may go to `line`'s engine now, nothing else
    waiting."""
    running = line.load.in_engine
    if running < plan.threads - plan.reserve:
        return True
    if running < plan.threads and small:
        return True
    return running < plan.threads + plan.prefetch and lend_after(plan, line, visits) == 0.0


def lend_after(plan: ThreadReserve, line: EngineLine, visits: int) -> float | None:
    """In how many seconds a turn of `visits` may borrow a reserved thread of `line`'s engine if nothing else
    changes (0: now; None: not by waiting alone).

    A newcomer waits for the first running search to end (KataGo never preempts), so a reserved thread is lent
    while that wait stays within `lend_bound_s`: to a search estimated that short itself (and then `prefetch`
    turns more into KataGo's queue), or, for a longer one and only up to the threads, while some other search
    running there is estimated to end that soon. Searches that started together (a hog's first burst) end
    together: nothing of them is lent until their end is that near, however many threads there are."""
    bound = plan.lend_bound_s
    load = line.load
    per_visit = load.search_s(1) if bound > 0 else None
    if per_visit is None:
        return None
    if visits * per_visit <= bound:
        return 0.0
    if load.in_engine >= plan.threads:
        return None
    now = time.monotonic()
    soonest: float | None = None
    for piece in line.pieces():  # oldest first: the first one usually decides
        each = piece.stream.visits_per_turn
        length = load.run_s(each)  # how long such searches ran, else the estimate (errs long)
        left = 0.0 if piece.orphan else piece.written_at + (each * per_visit if length is None else length) - now
        if left <= bound:
            return 0.0
        soonest = left if soonest is None else min(soonest, left)
    return None if soonest is None else soonest - bound
