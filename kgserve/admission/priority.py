"""Priority classes: `interactive` and `batch`, mapped onto KataGo's per-query `priority`.

KataGo keeps one queue of analysis requests (one per analysed turn) ordered by `priority`, then by
arrival; a search thread that becomes free takes the highest-priority waiting request; a running search
is never preempted (cpp/command/analysis.cpp: `toAnalyzeQueue`, key `(priority, -numRequestsSoFar)`).
So an interactive query waits at most for one search thread to finish, instead of behind the whole
batch backlog, once every interactive priority is above every batch one.

Each class owns a band of KataGo priorities: the priority KataGo would read from the caller's own `priority`
(or from each of `priorities`: floats truncated, uint64 wrapped, kgserve.katago.priorities) is clamped to
[-BAND, BAND] and shifted by the class's offset, so a caller still orders its own queries inside its class,
and no value KataGo accepts lets a batch query outrank an interactive one. A value KataGo refuses (a float
`priority`, a boolean, beyond +-2^62) is left alone, for KataGo to answer with its own error line.

Fairness between clients: inside its class's band a query also steps down one LEVEL_STEP per query its client
already has in flight in that class (its `level`; a request's own queries take consecutive levels in the order
KataGo would run them, `request_levels`). A level step is wider than the caller's whole clamped range, so the
engine starts every client's first query in flight before anyone's second, whatever priorities they ask for: a
client keeping hundreds of queries in flight no longer makes a newcomer's query wait behind them all. A caller's
own priorities still order its queries inside one request and among queries sent at the same level; a later
query of a client with a backlog comes after that backlog (in its class), whatever its own priority.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Literal, get_args

from kgserve.katago.priorities import read_priorities, read_priority
from kgserve.katago.protocol import Query

__all__ = [
    "BAND",
    "CLASS_OFFSET",
    "LEVELS",
    "LEVEL_STEP",
    "PriorityClass",
    "UnknownClass",
    "apply_class",
    "apply_classes",
    "class_priority",
    "fairness_levels",
    "own_priority",
    "parse_class",
    "request_levels",
]

PriorityClass = Literal["interactive", "batch"]
BAND = 10**12  # a caller's own priority is clamped to +-BAND inside its class
LEVEL_STEP = 2 * BAND + 1  # one query more in flight for its client: below every priority of the level above
LEVELS = 4096  # levels past this share the lowest (a client over 4095 queries in flight in one class)
# batch spans [-BAND - (LEVELS - 1) * LEVEL_STEP, BAND] (about -8.2e15 to 1e12); interactive the same range
# shifted by 1e16, whose lowest (about 1.8e15) is above batch's highest: no level or caller priority crosses
CLASS_OFFSET: dict[PriorityClass, int] = {"batch": 0, "interactive": 10**16}


class UnknownClass(ValueError):
    """A priority class name that is neither interactive nor batch."""


def parse_class(value: str | None, default: PriorityClass) -> PriorityClass:
    """The class a client asked for (header or parameter), or `default` when it asked for none."""
    if value is None or not value.strip():
        return default
    name = value.strip().lower()
    for known in get_args(PriorityClass):
        if name == known:
            klass: PriorityClass = known
            return klass
    raise UnknownClass(f"priority class must be 'interactive' or 'batch', got {value!r}")


def class_priority(klass: PriorityClass, own: int, level: int = 0) -> int:
    """The KataGo priority for a caller priority `own` in class `klass`, for a query whose client already has
    `level` queries in flight in that class."""
    return CLASS_OFFSET[klass] + max(-BAND, min(BAND, own)) - min(max(0, level), LEVELS - 1) * LEVEL_STEP


def fairness_levels(inflight: int, interactive: int, *, enabled: bool) -> dict[PriorityClass, int] | None:
    """A client's queries in flight per class, from its counts (kgserve.admission.clients.Client): the levels its
    next queries continue; None when fairness between clients is off (`priority.fairness`: every level 0). The one
    place both front ends (HTTP intake, WebSocket) derive a query's level from."""
    if not enabled:
        return None
    return {"interactive": interactive, "batch": inflight - interactive}


def own_priority(query: Query) -> int:
    """The priority the query asks for, as KataGo reads it (the highest of `priorities`); 0 when it asks for
    none, or for one KataGo refuses. Only for ordering a request's queries (request_levels)."""
    body = query.body
    if "priorities" in body:
        values = read_priorities(body["priorities"])
        return max(values) if values else 0
    if "priority" in body:
        return read_priority(body["priority"]) or 0
    return 0


def request_levels(owns: Sequence[int], base: int) -> list[int]:
    """The levels of one request's queries of one class, `owns` their own priorities, `base` the queries their
    client had in flight in that class before: consecutive from `base`, in the order KataGo would start them
    (highest priority first, then as sent), so the request's own order survives the levels."""
    order = sorted(range(len(owns)), key=lambda index: -owns[index])  # stable: ties keep the order sent
    levels = [0] * len(owns)
    for rank, index in enumerate(order):
        levels[index] = base + rank
    return levels


def _with(query: Query, key: str, value: int | list[int]) -> Query:
    """The query with `key` set to `value`. The engine still gets the client's own bytes, with the key appended
    last (KataGo's JSON reader keeps the last of duplicate keys, as kgserve.katago.protocol.engine_line relies
    on): a dict copy and a byte concatenation, no re-encoding of the query."""
    raw = query.raw
    if raw is not None:
        text = str(value).replace(" ", "") if isinstance(value, list) else str(value)
        raw = b'%s,"%s":%s}' % (raw[:-1], key.encode("ascii"), text.encode("ascii"))
    return replace(query, body={**query.body, key: value}, raw=raw)


def apply_class(query: Query, klass: PriorityClass, level: int = 0) -> Query:
    """The query with its priority moved into `klass`'s band, `level` steps down (the same object when nothing
    changes)."""
    body = query.body
    if "priority" in body and "priorities" in body:
        return query  # KataGo refuses both at once: let it say so
    if "priorities" in body:
        values = read_priorities(body["priorities"])
        if values is None:
            return query
        return _with(query, "priorities", [class_priority(klass, value, level) for value in values])
    if "priority" not in body:
        priority = class_priority(klass, 0, level)
        if priority == 0:
            return query  # KataGo's default priority 0 is batch's own 0 at level 0: nothing to add
        return _with(query, "priority", priority)
    own = read_priority(body["priority"])
    if own is None:
        return query
    priority = class_priority(klass, own, level)
    if priority == body["priority"]:
        return query  # already in its band as KataGo reads it: the client's own bytes go to the engine
    return _with(query, "priority", priority)


def apply_classes(
    queries: Sequence[Query], classes: Sequence[PriorityClass], in_flight: Mapping[PriorityClass, int] | None
) -> list[Query]:
    """One request's queries, each moved into its class's band; `in_flight`: the queries their client already
    has in flight per class, whose levels the request's queries continue (None: no levels, fairness off)."""
    if len(queries) == 1:  # the common request: its level is the client's count, nothing to order
        level = in_flight.get(classes[0], 0) if in_flight is not None else 0
        return [apply_class(queries[0], classes[0], level)]
    mapped = list(queries)
    for klass in set(classes):
        indices = [index for index, each in enumerate(classes) if each == klass]
        if in_flight is None:
            levels = [0] * len(indices)
        else:
            levels = request_levels([own_priority(queries[index]) for index in indices], in_flight.get(klass, 0))
        for index, level in zip(indices, levels, strict=True):
            mapped[index] = apply_class(queries[index], klass, level)
    return mapped
