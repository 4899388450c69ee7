"""The memory budget: the bytes kgserve holds for work in flight, against `limits.memory_budget_bytes` (all
clients) and `limits.memory_per_client_bytes` (one client).

What is counted, and when (the figures behind the cost model: docs/http-limits.md, "The memory budget"):

- a request body while it is read (HTTP: its Content-Length up front, or chunk by chunk), then each query of it
  (a WebSocket message's queries likewise) for as long as the query runs: `query_cost`, a fixed cost per query
  (its Python objects, its stream, a small answer) plus LINE_COPIES times its line (the body, the query's own
  bytes, the line written to the engine's stdin and the pipe's buffer while the engine has not read it);
- answer bytes waiting for a client that does not read them (HTTP's outbox, a WebSocket's send buffer) beyond
  the first ANSWER_FREE_BYTES of each response or connection (covered by the fixed per-query cost), as they
  wait; a client that would pass its share or the budget is dropped as a slow client.

Whatever passes the budget is refused at once: a request with 429 (Retry-After), a WebSocket query with an
error line; a request that could never fit gets 413.

When the budget falls back to nothing held after IDLE_AFTER_BYTES or more were taken, `on_idle` runs (the app sets
it to kgserve.procs.malloc.trim_malloc): the burst's memory goes back to the system, not only to the heap.
"""

from __future__ import annotations

from collections.abc import Callable

from kgserve.admission.clients import Client

__all__ = ["ANSWER_FREE_BYTES", "IDLE_AFTER_BYTES", "LINE_COPIES", "QUERY_BYTES", "MemoryBudget", "query_cost"]

QUERY_BYTES = 16 << 10  # a query's own objects (Query, body dict, stream, admission) and a small answer
LINE_COPIES = 4  # the line as received, as a query, as written to the engine, as buffered for the pipe
ANSWER_FREE_BYTES = 16 << 10  # answer bytes of a response (or connection) counted in QUERY_BYTES
IDLE_AFTER_BYTES = 16 << 20  # a burst worth giving back when it is over (below it, trimming is not worth a call)


def query_cost(line_bytes: int, queries: int = 1) -> int:
    """What `queries` queries of `line_bytes` bytes in all hold while they run."""
    return queries * QUERY_BYTES + LINE_COPIES * line_bytes


class MemoryBudget:
    def __init__(self, total: int, per_client: int) -> None:
        self.total = total
        self.per_client = per_client
        self.held = 0
        self.on_idle: Callable[[], object] | None = None  # called when nothing is held after a burst
        self._taken_since_idle = 0

    def refusal(self, client: Client, amount: int) -> str | None:
        """Why `amount` more bytes for `client` do not fit now (None: they fit)."""
        if self.held + amount > self.total:
            return (
                f"kgserve: over the memory budget for work in flight ({self.held + amount} of {self.total} bytes, "
                "limits.memory_budget_bytes); retry later"
            )
        if client.memory + amount > self.per_client:
            return (
                f"kgserve: this client would hold {client.memory + amount} bytes of work in flight, over its share "
                f"of {self.per_client} (limits.memory_per_client_bytes); retry when some of it has finished"
            )
        return None

    def never_fits(self, amount: int) -> str | None:
        """Why `amount` bytes for one client could never fit, even on an idle server (None: they could)."""
        limit = min(self.total, self.per_client)
        if amount <= limit:
            return None
        return (
            f"kgserve: this request would hold {amount} bytes of work in flight, more than one client may hold "
            f"({limit}: limits.memory_budget_bytes, limits.memory_per_client_bytes); send fewer or smaller queries"
        )

    def take(self, client: Client, amount: int) -> bool:
        """Count `amount` bytes for `client` if they fit; False (nothing counted) if they do not."""
        if self.held + amount > self.total or client.memory + amount > self.per_client:
            return False
        self.held += amount
        client.memory += amount
        self._taken_since_idle += amount
        return True

    def give(self, client: Client, amount: int) -> None:
        self.held -= amount
        client.memory -= amount
        if self.held == 0 and self._taken_since_idle >= IDLE_AFTER_BYTES:
            self._taken_since_idle = 0
            if self.on_idle is not None:
                self.on_idle()
