"""Admission of work in flight, shared by POST /analysis and /ws: the server-wide bound on queries
(`limits.max_inflight_queries`), the per-client bound (`limits.max_inflight_per_client`), the memory budget
(kgserve.admission.budget), the clients that hold them (kgserve.admission.clients) and their rates
(kgserve.admission.rates: WebSocket lines and HTTP requests a second, taken at that pace rather than refused).

Work over a bound is refused at once (HTTP 429 with Retry-After, an error line over /ws; 413 for a request that
could never fit): nothing queues in kgserve, so a client sees the overload instead of a growing latency. What
was admitted is held by a `Ticket` until its queries are over, whatever its client does. Every refusal is counted
by its reason (`kgserve_refusals_total{reason}`).

Work-conserving (issue 40): the per-client bound engages only while another client has queries in flight (they
contend for the engine's queue). A client alone may have up to the server-wide bound in flight, less its last
1/INFLIGHT_RESERVE_DIVISOR, kept for clients under their per-client bound: a newcomer's first queries are admitted
however many the lone client has. Once another client has work in flight, the lone client's queries already
admitted run on; its new ones wait for its count to come back under its bound: an HTTP request waits in kgserve
(kgserve.admission.holding, at most `limits.hold_past_share_s`), a WebSocket query gets an error line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from kgserve.admission.budget import MemoryBudget
from kgserve.admission.clients import Client, ClientTable
from kgserve.admission.holding import HeldRequests
from kgserve.admission.rates import Rates
from kgserve.settings import LimitsSettings

__all__ = ["INFLIGHT_RESERVE_DIVISOR", "Admission", "Refusal", "Ticket"]

INFLIGHT_RESERVE_DIVISOR = 8  # the last 1/8 of limits.max_inflight_queries: only for clients under their own bound


class Refusal(NamedTuple):
    status: int  # 429: retry later; 413: it could never fit
    message: str
    reason: str = "memory"  # kgserve_refusals_total{reason}: server_inflight, client_inflight, memory, ...


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
        self.open_inflight = self.max_inflight - self.max_inflight // INFLIGHT_RESERVE_DIVISOR  # past its bound
        self.inflight = 0
        self.held = HeldRequests()  # requests past their client's bound, waiting for room
        self.hold_s = limits.hold_past_share_s
        self.budget = MemoryBudget(limits.memory_budget_bytes, limits.memory_per_client_bytes)
        self.clients = ClientTable(
            limits.max_connections_per_client, float(limits.max_partial_bytes_per_s), limits.max_connections
        )
        self.message_rates = Rates(limits.max_messages_per_s_per_client)  # lines a second per client, over /ws
        self.request_rates = Rates(limits.max_requests_per_s_per_client)  # HTTP requests a second per client

    def admit(
        self, client: Client, queries: int, memory: int, interactive: int = 0, held: int = 0, *, counted: bool = True
    ) -> Ticket | Refusal:
        """Take `queries` in-flight slots and `memory` bytes for `client`, or say why not. `held`: bytes the
        request already holds (`charge`, its body), from now on held by the ticket. `counted`: a refusal is counted
        (kgserve_refusals_total) here; False: by the caller, which may yet hold the request and try again."""
        refused = self._inflight_refusal(client, queries) or self._memory_refusal(client, held + memory, memory)
        if refused is not None:
            if counted:
                self.clients.refused(refused.reason)
            return refused
        self.inflight += queries
        client.inflight += queries
        client.interactive += interactive
        return Ticket(client, queries, interactive, held + memory)

    def _inflight_refusal(self, client: Client, queries: int) -> Refusal | None:
        after = self.inflight + queries
        if after > self.max_inflight:
            return Refusal(
                429,
                f"kgserve: over the limit of {self.max_inflight} queries in flight "
                "(limits.max_inflight_queries); retry later",
                "server_inflight",
            )
        if client.inflight + queries <= self.max_per_client:
            return None
        if queries > self.open_inflight:
            return Refusal(
                413,
                f"kgserve: {queries} queries are more than one client may have in flight ({self.open_inflight}: "
                "limits.max_inflight_queries less its reserve for other clients); send fewer",
                "request_inflight",
            )
        if self.inflight > client.inflight:  # another client has work in flight: the per-client bound engages
            return Refusal(
                429,
                f"kgserve: over the limit of {self.max_per_client} queries in flight from one client while other "
                "clients have work in flight (limits.max_inflight_per_client); retry when some have finished",
                "client_inflight",
            )
        if after > self.open_inflight:
            return Refusal(
                429,
                f"kgserve: over the {self.open_inflight} queries in flight open to one client past "
                f"limits.max_inflight_per_client (the rest of limits.max_inflight_queries is kept for other "
                "clients); retry when some have finished",
                "client_inflight",
            )
        return None

    def _memory_refusal(self, client: Client, whole: int, memory: int) -> Refusal | None:
        never = self.budget.never_fits(whole)
        if never is not None:
            return Refusal(413, never, "request_memory")
        if not self.budget.take(client, memory):
            return Refusal(429, self.budget.refusal(client, memory) or "kgserve: over the memory budget", "memory")
        return None

    def charge(self, client: Client, memory: int) -> Refusal | None:
        """Hold `memory` bytes more for `client` (a body being read), or say why not."""
        refused = self._memory_refusal(client, memory, memory)
        if refused is not None:
            self.clients.refused(refused.reason)
        return refused

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
        if self.held.waiting:
            self.held.wake(client.key, ticket.queries)
            if not client.inflight:  # it contends no more: a client held only because of it may be alone now
                self.held.wake_alone(self._alone)

    def _alone(self, key: str) -> bool:
        client = self.clients.clients.get(key)
        return client is not None and client.inflight == self.inflight
