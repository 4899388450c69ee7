"""Clients, for the per-client caps: who holds what (connections, queries in flight, interactive queries, bytes
of the memory budget, its allowance of partial-line bytes).

A client is its remote address, and, where auth is on, the token it presented (each token of
`server.auth_token_env` is a client of its own, so clients behind one SSH tunnel or proxy, all 127.0.0.1, can be
told apart by their tokens). Behind a proxy listed in `server.trusted_proxies` the address is the one it forwarded
(kgserve.admission.proxies). Open connections are counted per address only: a connection's token is known only
once its request's headers have come (a trusted proxy's requests count per forwarded address, kgserve.forwarded).
An entry lives while its client holds anything, so the table stays as
small as the set of active clients, whatever addresses come and go.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

__all__ = ["Client", "ClientTable", "client_key", "over_connections_text"]


def client_key(address: str | None, credential: str | None = None) -> str:
    """The key of a client: its address (`-` when unknown), and the label of its token when it presented one."""
    host = address or "-"
    return host if credential is None else f"{host}|{credential}"


def over_connections_text(max_connections: int) -> str:
    """What a client past `limits.max_connections_per_client` is told (with a 429)."""
    return (
        f"kgserve: over the limit of {max_connections} open connections from this client "
        "(limits.max_connections_per_client)"
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

    def __init__(self, max_connections: int, partial_rate: float = 0.0) -> None:
        self.max_connections = max_connections
        self.partial_rate = partial_rate
        self.clients: dict[str, Client] = {}
        self.connections: dict[str, int] = {}

    # -- connections (per address) -------------------------------------------------------------------------
    def connect(self, address: str | None) -> bool:
        """Count a new connection from `address`; False (not counted) when it would pass the cap."""
        host = address or "-"
        count = self.connections.get(host, 0)
        if count >= self.max_connections:
            return False
        self.connections[host] = count + 1
        return True

    def disconnect(self, address: str | None) -> None:
        host = address or "-"
        count = self.connections.get(host, 0) - 1
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
