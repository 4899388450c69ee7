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
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal, get_args

from kgserve.katago.priorities import read_priorities, read_priority
from kgserve.katago.protocol import Query

__all__ = ["BAND", "CLASS_OFFSET", "PriorityClass", "UnknownClass", "apply_class", "class_priority", "parse_class"]

PriorityClass = Literal["interactive", "batch"]
BAND = 10**12  # a caller's own priority is clamped to +-BAND inside its class
CLASS_OFFSET: dict[PriorityClass, int] = {"batch": 0, "interactive": 4 * BAND}


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


def class_priority(klass: PriorityClass, own: int) -> int:
    """The KataGo priority for a caller priority `own` in class `klass`."""
    return CLASS_OFFSET[klass] + max(-BAND, min(BAND, own))


def apply_class(query: Query, klass: PriorityClass) -> Query:
    """The query with its priority moved into `klass`'s band (the same object when nothing changes)."""
    body = query.body
    if "priority" in body and "priorities" in body:
        return query  # KataGo refuses both at once: let it say so
    if "priorities" in body:
        values = read_priorities(body["priorities"])
        if values is None:
            return query
        mapped: dict[str, Any] = {**body, "priorities": [class_priority(klass, value) for value in values]}
        return replace(query, body=mapped, raw=None)  # the engine must get the new body, not the raw line
    if "priority" not in body:
        if klass == "batch":
            return query  # KataGo's default priority 0 is batch's own 0: nothing to add
        return replace(query, body={**body, "priority": class_priority(klass, 0)}, raw=None)
    own = read_priority(body["priority"])
    if own is None:
        return query
    priority = class_priority(klass, own)
    if priority == body["priority"]:
        return query  # already in its band as KataGo reads it: the client's own bytes go to the engine
    return replace(query, body={**body, "priority": priority}, raw=None)
