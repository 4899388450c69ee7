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

The reserve. A per-client share bounds one client, not a client with several addresses: four of them at their
64 MiB share fill the 256 MiB budget, and then everyone else is refused for as long as their work lasts (issue 27:
one well-behaved request in 38 got 429 under six such addresses). So the last `total // RESERVE_DIVISOR` bytes of
the budget (32 MiB of 256) are kept for clients that hold little: a take that would go past `total - reserve` is
let through only when its client would then hold at most `reserve // SMALL_CLIENTS` bytes (2 MiB: ~120 small
queries in flight). Whoever hogs the pool can fill 7/8 of it, never the rest; a client asking for a request of
normal size while holding nearly nothing gets it, unless SMALL_CLIENTS clients of its kind are already there.
Chosen over a max-min fair share (each client's allowance shrinking to budget / active clients under pressure):
a fair share frees nothing that is already held, so it needs headroom kept free anyway, and the allowance it
gives shrinks with every address an attacker adds; the reserve is two comparisons per take, whatever the number
of clients. Both figures are fractions of the budget, so they scale with it (and with kgserve.procs.workers'
split of it).

The per-client share stays on for a client alone (issue 40 made the other per-client bounds work-conserving, not
this one): a lone client sending ~1 MB queries filled the open part (224 MiB) in the hostile benchmark's memory attack,
its backlog in the engine's stdin made the engine look frozen until it was restarted (87 of its requests and 3 of the
well-behaved client's got 503), and kgserve's RSS stayed 68 MB up afterwards (docs/http-limits.md). A batch client
of small queries (issue 40's: ~26 KB each, 512 to 1,024 in flight: 13-26 MB) never meets the 64 MiB share.

When the budget falls back to nothing held after IDLE_AFTER_BYTES or more were taken, `on_idle` runs (the app sets
it to kgserve.procs.malloc.trim_malloc): the burst's memory goes back to the system, not only to the heap.
"""

from __future__ import annotations

from collections.abc import Callable

from kgserve.admission.clients import Client

__all__ = [
    "ANSWER_FREE_BYTES",
    "IDLE_AFTER_BYTES",
    "LINE_COPIES",
    "QUERY_BYTES",
    "RESERVE_DIVISOR",
    "SMALL_CLIENTS",
    "MemoryBudget",
    "query_cost",
]

QUERY_BYTES = 16 << 10  # a query's own objects (Query, body dict, stream, admission) and a small answer
LINE_COPIES = 4  # the line as received, as a query, as written to the engine, as buffered for the pipe
ANSWER_FREE_BYTES = 16 << 10  # answer bytes of a response (or connection) counted in QUERY_BYTES
IDLE_AFTER_BYTES = 16 << 20  # a burst worth giving back when it is over (below it, trimming is not worth a call)
RESERVE_DIVISOR = 8  # the budget's last 1/8 is kept for clients holding little (module docstring)
SMALL_CLIENTS = 16  # ... each holding at most 1/16 of that reserve: 16 of them fit in it at their largest

_FITS, _OVER_TOTAL, _OVER_SHARE, _OVER_OPEN = range(4)


def query_cost(line_bytes: int, queries: int = 1) -> int:
    """What `queries` queries of `line_bytes` bytes in all hold while they run."""
    return queries * QUERY_BYTES + LINE_COPIES * line_bytes


class MemoryBudget:
    def __init__(self, total: int, per_client: int) -> None:
        self.total = total
        self.per_client = per_client
        self.reserve = total // RESERVE_DIVISOR
        self.open = total - self.reserve  # what clients holding more than `small` may fill between them
        self.small = self.reserve // SMALL_CLIENTS  # a client holding at most this may use the reserve
        self.held = 0
        self.on_idle: Callable[[], object] | None = None  # called when nothing is held after a burst
        self._taken_since_idle = 0

    def _check(self, client: Client, amount: int) -> int:
        after = self.held + amount
        if after > self.total:
            return _OVER_TOTAL
        mine = client.memory + amount
        if mine > self.per_client:
            return _OVER_SHARE
        if after > self.open and mine > self.small:
            return _OVER_OPEN
        return _FITS

    def refusal(self, client: Client, amount: int) -> str | None:
        """Why `amount` more bytes for `client` do not fit now (None: they fit)."""
        why = self._check(client, amount)
        if why == _OVER_TOTAL:
            return (
                f"kgserve: over the memory budget for work in flight ({self.held + amount} of {self.total} bytes, "
                "limits.memory_budget_bytes); retry later"
            )
        if why == _OVER_SHARE:
            return (
                f"kgserve: this client would hold {client.memory + amount} bytes of work in flight, over its share "
                f"of {self.per_client} (limits.memory_per_client_bytes); retry when some of it has finished"
            )
        if why == _OVER_OPEN:
            return (
                f"kgserve: over the memory budget for work in flight ({self.held + amount} of the {self.open} bytes "
                f"open to a client holding over {self.small}; the last {self.reserve} of limits.memory_budget_bytes "
                "are kept for clients holding less); retry later"
            )
        return None

    def never_fits(self, amount: int) -> str | None:
        """Why `amount` bytes for one client could never fit, even on an idle server (None: they could). A client
        may always fill the open part of the budget (`small` is far below it), never more."""
        limit = min(self.open, self.per_client)
        if amount <= limit:
            return None
        return (
            f"kgserve: this request would hold {amount} bytes of work in flight, more than one client may hold "
            f"({limit}: limits.memory_budget_bytes less its reserve, limits.memory_per_client_bytes); send fewer "
            "or smaller queries"
        )

    def take(self, client: Client, amount: int) -> bool:
        """Count `amount` bytes for `client` if they fit; False (nothing counted) if they do not."""
        if self._check(client, amount) != _FITS:
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
