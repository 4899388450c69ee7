"""Clients, for the per-client caps: who holds what (connections, queries in flight, interactive queries, bytes
of the memory budget, its allowance of partial-line bytes).

A client is its remote address, and, where auth is on, the token it presented (each token of
`server.auth_token_env` is a client of its own, so clients behind one SSH tunnel or proxy, all 127.0.0.1, can be
told apart by their tokens). Behind a proxy listed in `server.trusted_proxies` the address is the one it forwarded
(kgserve.admission.proxies). Open connections are counted per address only: a connection's token is known only
once its request's headers have come (a trusted proxy's requests count per forwarded address, kgserve.forwarded).
An entry lives while its client holds anything, so the table stays as
small as the set of active clients, whatever addresses come and go.

Connections are work-conserving (issue 40): an address may open as many as the server's connection budget holds
(`connection_budget`: the file-descriptor limit, less a share kept for the engines' pipes and files), except its
last 1/NEWCOMER_DIVISOR, kept for addresses holding fewer than `limits.max_connections_per_client`: so a batch client
with 512 or 1,024 connections on one address is accepted while descriptors are free, and a newcomer still gets in
when it has taken all the rest. Only a connection past those bounds is refused (429 and closed, an access line and
`kgserve_refusals_total{reason}`): holding it instead would hold the very descriptor that is short. Since one address
may now hold a burst of connections (the memory attack's 1,000, each with up to ~120 KB of body read before its
refusal), `on_drained` runs when such a burst (DRAINED_AFTER or more at once) has gone (the app sets it to
kgserve.procs.malloc.trim_malloc, a second later): their buffers go back to the system, as the memory budget's do.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "DRAINED_AFTER",
    "FDS_KEPT_DIVISOR",
    "FDS_KEPT_MIN",
    "NEWCOMER_DIVISOR",
    "Client",
    "ClientTable",
    "client_key",
    "connection_budget",
    "over_budget_text",
    "over_connections_text",
]

FDS_KEPT_MIN = 64  # descriptors never given to connections: engines' pipes, log files, the listening socket...
FDS_KEPT_DIVISOR = 16  # ... or 1/16 of the limit, whichever is more
NEWCOMER_DIVISOR = 8  # the connection budget's last 1/8: only for addresses under limits.max_connections_per_client
UNLIMITED_FDS = 1 << 20  # what RLIM_INFINITY counts as (Linux's default nr_open)
DRAINED_AFTER = 256  # connections open at once: a burst whose end is worth giving memory back after


def connection_budget(open_files: int | None = None) -> int:
    """Connections one kgserve process may hold open: its RLIMIT_NOFILE (soft), less what it keeps for the rest."""
    if open_files is None:
        open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if open_files == resource.RLIM_INFINITY or open_files <= 0:
        open_files = UNLIMITED_FDS
    return max(1, open_files - max(FDS_KEPT_MIN, open_files // FDS_KEPT_DIVISOR))


def client_key(address: str | None, credential: str | None = None) -> str:
    """The key of a client: its address (`-` when unknown), and the label of its token when it presented one."""
    host = address or "-"
    return host if credential is None else f"{host}|{credential}"


def over_connections_text(max_connections: int, budget: int = 0) -> str:
    """What a client past `limits.max_connections_per_client` is told (with a 429), once the server's connections
    are nearly all taken (`budget`: the connection budget; 0: the text of a proxy's forwarded client)."""
    held = f" while the server's {budget} connections are nearly all taken" if budget else ""
    return (
        f"kgserve: over the limit of {max_connections} open connections from this client{held} "
        "(limits.max_connections_per_client)"
    )


def over_budget_text(budget: int) -> str:
    """What a new connection is told (with a 429) when the server holds all the connections it may."""
    return (
        f"kgserve: the server holds the {budget} connections its file-descriptor limit allows "
        "(limits.max_connections, RLIMIT_NOFILE); retry later"
    )


@dataclass(slots=True, eq=False)
class Client:
    key: str
    inflight: int = 0  # queries admitted and not over
    interactive: int = 0  # of which in the interactive class (kgserve.admission.priority)
    memory: int = 0  # bytes of the memory budget it holds (kgserve.admission.budget)
    holders: int = 0  # requests and WebSocket connections using this entry
    partial_rate: float = 0.0  # partial-line bytes per second it may be sent; 0: no cap
    _tokens: float = 0.0
    _refilled: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self._tokens = self.partial_rate  # a second's worth to begin with

    def take_partial(self, size: int) -> bool:
        """Whether a partial line of `size` bytes may go to this client now (a token bucket: `partial_rate`
        bytes per second, a second's worth of burst); False: it is over its share and the line is not sent."""
        if not self.partial_rate:
            return True
        now = time.monotonic()
        self._tokens = min(self.partial_rate, self._tokens + (now - self._refilled) * self.partial_rate)
        self._refilled = now
        if self._tokens < size:
            return False
        self._tokens -= size
        return True


class ClientTable:
    """The clients holding anything now; `connections` counts open connections per address."""

    def __init__(self, max_connections: int, partial_rate: float = 0.0, budget: int = 0) -> None:
        self.max_connections = max_connections  # per address, engaged only in the budget's last share
        self.budget = budget or connection_budget()  # connections, all addresses together
        self.open = self.budget - self.budget // NEWCOMER_DIVISOR  # what addresses at their cap may fill
        self.partial_rate = partial_rate
        self.clients: dict[str, Client] = {}
        self.connections: dict[str, int] = {}
        self.total = 0  # open connections counted, all addresses
        self.on_drained: Callable[[], object] | None = None  # called when a burst of connections has gone
        self._peak = 0  # the most open at once since the last drain
        self.refusals: dict[str, int] = {}  # every refusal a client met, by reason (kgserve_refusals_total{reason})

    def refused(self, reason: str) -> None:
        """Count a refusal (a connection, a request, a WebSocket query) for kgserve_refusals_total{reason}."""
        self.refusals[reason] = self.refusals.get(reason, 0) + 1

    # -- connections (per address) -------------------------------------------------------------------------
    def connect(self, address: str | None) -> str | None:
        """Count a new connection from `address`; or why it is refused (not counted): `server_connections` when
        the budget is full, `client_connections` when only its newcomers' share is left and `address` holds
        `max_connections` already."""
        host = address or "-"
        count = self.connections.get(host, 0)
        if self.total >= self.budget:
            return "server_connections"
        if count >= self.max_connections and self.total >= self.open:
            return "client_connections"
        self.connections[host] = count + 1
        self.total += 1
        self._peak = max(self._peak, self.total)
        return None

    def refusal_text(self, reason: str) -> str:
        """What a connection refused for `reason` (connect's) is told."""
        if reason == "server_connections":
            return over_budget_text(self.budget)
        return over_connections_text(self.max_connections, self.budget)

    def disconnect(self, address: str | None) -> None:
        host = address or "-"
        count = self.connections.get(host, 0) - 1
        if count >= 0:
            self.total -= 1
            if self._peak >= DRAINED_AFTER and self.total <= self._peak // 16:  # a burst over
                self._peak = self.total
                if self.on_drained is not None:
                    self.on_drained()
        if count > 0:
            self.connections[host] = count
        else:
            self.connections.pop(host, None)

    # -- holders (requests, WebSocket connections) ---------------------------------------------------------
    def hold(self, key: str) -> Client:
        """The client's entry, made if it has none, held until `let_go`."""
        client = self.clients.get(key)
        if client is None:
            client = self.clients[key] = Client(key, partial_rate=self.partial_rate)
        client.holders += 1
        return client

    def let_go(self, client: Client) -> None:
        """One holder less; the entry goes once nothing holds it and it holds nothing."""
        client.holders -= 1
        self.forget_if_idle(client)

    def forget_if_idle(self, client: Client) -> None:
        """Drop the entry when nothing holds it and it holds nothing (called whenever it lets something go)."""
        if client.holders <= 0 and not client.inflight and not client.memory and self.clients.get(client.key) is client:
            del self.clients[client.key]
