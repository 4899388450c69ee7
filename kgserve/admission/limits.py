"""Admission of work in flight, shared by POST /analysis and /ws: the server-wide bound on queries
(`limits.max_inflight_queries`), the per-client bound (`limits.max_inflight_per_client`), the memory budget
(kgserve.admission.budget), the clients that hold them (kgserve.admission.clients) and their rates
(kgserve.admission.rates: WebSocket lines and HTTP requests a second, taken at that pace rather than refused).

Work over a bound is refused at once (HTTP 429 with Retry-After, an error line over /ws; 413 for a request that
could never fit): nothing queues in kgserve, so a client sees the overload instead of a growing latency. What
was admitted is held by a `Ticket` until its queries are over, whatever its client does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from kgserve.admission.budget import MemoryBudget
from kgserve.admission.clients import Client, ClientTable
from kgserve.admission.rates import Rates
from kgserve.settings import LimitsSettings

__all__ = ["Admission", "Refusal", "Ticket"]


class Refusal(NamedTuple):
    status: int  # 429: retry later; 413: it could never fit
    message: str


@dataclass(slots=True, eq=False)
class Ticket:
    """What one admitted request (HTTP) or query (WebSocket) holds, given back once by Admission.release."""

    client: Client
    queries: int
    interactive: int
    memory: int
    released: bool = False


class Admission:
    def __init__(self, limits: LimitsSettings) -> None:
        self.max_inflight = limits.max_inflight_queries
        self.max_per_client = limits.max_inflight_per_client
        self.inflight = 0
        self.budget = MemoryBudget(limits.memory_budget_bytes, limits.memory_per_client_bytes)
        self.clients = ClientTable(limits.max_connections_per_client, float(limits.max_partial_bytes_per_s))
        self.message_rates = Rates(limits.max_messages_per_s_per_client)  # lines a second per client, over /ws
        self.request_rates = Rates(limits.max_requests_per_s_per_client)  # HTTP requests a second per client

    def admit(self, client: Client, queries: int, memory: int, interactive: int = 0, held: int = 0) -> Ticket | Refusal:
        """Take `queries` in-flight slots and `memory` bytes for `client`, or say why not. `held`: bytes the
        request already holds (`charge`, its body), from now on held by the ticket."""
        if self.inflight + queries > self.max_inflight:
            return Refusal(
                429,
                f"kgserve: over the limit of {self.max_inflight} queries in flight "
                "(limits.max_inflight_queries); retry later",
            )
        if client.inflight + queries > self.max_per_client:
            status = 413 if queries > self.max_per_client else 429
            return Refusal(
                status,
                f"kgserve: over the limit of {self.max_per_client} queries in flight from one client "
                "(limits.max_inflight_per_client); retry when some have finished",
            )
        never = self.budget.never_fits(held + memory)
        if never is not None:
            return Refusal(413, never)
        if not self.budget.take(client, memory):
            return Refusal(429, self.budget.refusal(client, memory) or "kgserve: over the memory budget")
        self.inflight += queries
        client.inflight += queries
        client.interactive += interactive
        return Ticket(client, queries, interactive, held + memory)

    def charge(self, client: Client, memory: int) -> Refusal | None:
        """Hold `memory` bytes more for `client` (a body being read), or say why not."""
        never = self.budget.never_fits(memory)
        if never is not None:
            return Refusal(413, never)
        if not self.budget.take(client, memory):
            return Refusal(429, self.budget.refusal(client, memory) or "kgserve: over the memory budget")
        return None

    def discharge(self, client: Client, memory: int) -> None:
        """Give back bytes held by `charge`."""
        self.budget.give(client, memory)
        self.clients.forget_if_idle(client)

    def release(self, ticket: Ticket) -> None:
        """Give back what the ticket holds (once; a second call does nothing)."""
        if ticket.released:
            return
        ticket.released = True
        client = ticket.client
        self.inflight = max(0, self.inflight - ticket.queries)
        client.inflight -= ticket.queries
        client.interactive -= ticket.interactive
        self.budget.give(client, ticket.memory)
        self.clients.forget_if_idle(client)
