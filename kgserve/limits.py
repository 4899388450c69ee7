"""Admission control for POST /analysis: body size, in-flight bound, per-query caps, deadlines.

Everything here is decided before a query reaches the engine, and is visible to the client:

- body over `limits.max_body_bytes` -> 413 (checked on Content-Length first, then while reading);
- more than `limits.max_queries_per_request` request lines -> 413;
- over `limits.max_inflight_queries` queries in flight -> 429 with Retry-After, at once (nothing queues);
- a search over `limits.max_visits` visits -> an error line for that query naming the cap (`reject`), or the
  query runs with `maxVisits` = the cap and the response carries `X-Visits-Clamped` (`clamp`). The visits
  counted are the ones KataGo will search with: the query's `maxVisits`, else an `overrideSettings`
  `maxVisits` (an empty string there removes the bound: unbounded), else the cfg's `maxVisits`;
- `analyzeTurns` longer than `limits.max_turns_per_query` -> an error line for that query;
- `analyzeTurns: []`: KataGo analyses no turn and writes no line at all for such a query, so nothing could
  tell when it is finished: kgserve does not send it and it contributes no line to the response (so a
  KataGo error for an otherwise invalid query with no turns is not reported either);
- the request deadline is `limits.deadline_s`, or less when the client sends `X-Deadline-Ms`.
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from dataclasses import dataclass, replace

from kgserve.protocol import VISITS_UNBOUNDED, Query, Rejected, error_line
from kgserve.settings import LimitsSettings

__all__ = [
    "Admission",
    "BadRequestHeader",
    "BodyTooLarge",
    "CheckedQuery",
    "check_query",
    "deadline_seconds",
    "read_limited",
]


class BodyTooLarge(Exception):
    """The request body is over limits.max_body_bytes."""


class BadRequestHeader(Exception):
    """A request header kgserve reads holds an unusable value."""


async def read_limited(content_length: str | None, chunks: AsyncIterable[bytes], max_bytes: int) -> bytes:
    """The whole body, or BodyTooLarge as soon as it is known to be over `max_bytes`."""
    if content_length is not None:
        try:
            declared = int(content_length)
        except ValueError:
            declared = -1
        if declared > max_bytes:
            raise BodyTooLarge(f"Content-Length {declared} is over the limit of {max_bytes} bytes")
    parts: list[bytes] = []
    total = 0
    async for chunk in chunks:
        total += len(chunk)
        if total > max_bytes:
            raise BodyTooLarge(f"request body is over the limit of {max_bytes} bytes")
        parts.append(chunk)
    return b"".join(parts)


class Admission:
    """Counts queries in flight; `try_acquire` refuses at once instead of queueing."""

    def __init__(self, max_inflight: int) -> None:
        self.max_inflight = max_inflight
        self.inflight = 0

    def try_acquire(self, queries: int) -> bool:
        if self.inflight + queries > self.max_inflight:
            return False
        self.inflight += queries
        return True

    def release(self, queries: int) -> None:
        self.inflight = max(0, self.inflight - queries)


@dataclass(frozen=True, slots=True)
class CheckedQuery:
    query: Query
    clamped: bool = False
    silent: bool = False  # KataGo writes nothing at all for it (`analyzeTurns: []`): not sent to the engine


def search_visits(query: Query, cfg_visits: int | None) -> int:
    """The visits KataGo will search this query with: its own bound, else the cfg's (none: unbounded)."""
    if query.visits is not None:
        return query.visits
    return cfg_visits if cfg_visits is not None else VISITS_UNBOUNDED


def check_query(query: Query, limits: LimitsSettings, cfg_visits: int | None) -> CheckedQuery | Rejected:
    """Apply the per-query caps: an error line naming the cap, or the (possibly clamped) query.

    `cfg_visits` is the served cfg's `maxVisits` (None: the cfg sets none, so KataGo searches unbounded)."""
    turns = query.body.get("analyzeTurns")
    if isinstance(turns, list) and not turns:
        return CheckedQuery(query, silent=True)
    if isinstance(turns, list) and len(turns) > limits.max_turns_per_query:
        message = (
            f"kgserve: analyzeTurns has {len(turns)} entries, over the limit of "
            f"{limits.max_turns_per_query} (limits.max_turns_per_query)"
        )
        return Rejected(error_line(message, caller_id=query.caller_id, field="analyzeTurns"), query.caller_id)
    visits = search_visits(query, cfg_visits)
    if visits > limits.max_visits:
        if limits.visits_over_cap == "reject":
            message = (
                f"kgserve: {_visits_source(query)} {visits} is over the cap of {limits.max_visits} (limits.max_visits)"
            )
            return Rejected(error_line(message, caller_id=query.caller_id, field="maxVisits"), query.caller_id)
        # a top-level maxVisits overrides overrideSettings and the cfg in KataGo
        body = dict(query.body)
        body["maxVisits"] = limits.max_visits
        return CheckedQuery(replace(query, body=body, visits=limits.max_visits), clamped=True)
    return CheckedQuery(query)


def _visits_source(query: Query) -> str:
    if type(query.body.get("maxVisits")) is int:
        return "maxVisits"
    if query.visits is not None:
        return "overrideSettings maxVisits"
    return "the cfg's maxVisits (the query sets none)"


def deadline_seconds(header: str | None, limits: LimitsSettings) -> float:
    """The request's deadline: the config's, or the client's X-Deadline-Ms when shorter."""
    if header is None:
        return limits.deadline_s
    try:
        millis = float(header.strip())
    except ValueError:
        raise BadRequestHeader(f"X-Deadline-Ms must be a positive number of milliseconds, got {header!r}") from None
    if not millis > 0 or millis != millis or millis == float("inf"):
        raise BadRequestHeader(f"X-Deadline-Ms must be a positive number of milliseconds, got {header!r}")
    return min(limits.deadline_s, millis / 1000.0)
