"""Clients behind a trusted proxy: an ASGI layer, in front of everything else, installed only when
`server.trusted_proxies` lists a proxy (kgserve.app).

For an HTTP request or a WebSocket handshake whose TCP peer is a trusted proxy, `ForwardedClients`:

- replaces `scope["client"]` with the address the proxy forwarded in X-Forwarded-For (kgserve.admission.proxies:
  the right-most entry that is no trusted proxy), so the per-client caps (kgserve.admission.clients), the access
  line (`client=<address>`) and uvicorn's own log lines see the client, not the proxy. A header it cannot read
  leaves the peer's address, is counted (`kgserve_forwarded_for_invalid_total`) and logged, at most once a
  minute;
- counts the request (or the WebSocket, for as long as it is open) against the forwarded client's
  `limits.max_connections_per_client`: the proxy's own connections are left out of that count (kgserve.http.
  httpguard), and a client's connections to the proxy become its requests in progress here. Past the cap (engaged,
  as for direct connections, only in the connection budget's last share) or the budget: 429 with its text, an
  access line and `kgserve_refusals_total{reason}` (the proxy's connection stays open: other clients use it too).

A request from any other peer passes untouched: its header is never read.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from kgserve.admission.clients import ClientTable
from kgserve.admission.proxies import FORWARDED_FOR, TrustedProxies
from kgserve.logformat import write_access_line
from kgserve.metrics import Metrics

__all__ = ["ForwardedClients"]

log = logging.getLogger("kgserve.forwarded")
WARN_EVERY_S = 60.0  # a proxy that keeps sending unreadable headers is logged once a minute, with the count


class ForwardedClients:
    def __init__(self, app: ASGIApp, *, proxies: TrustedProxies, clients: ClientTable, metrics: Metrics) -> None:
        self.app = app
        self.proxies = proxies
        self.clients = clients
        self.metrics = metrics
        self._unlogged = 0  # unreadable headers since the last warning
        self._warned = -WARN_EVERY_S

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        peer = scope.get("client")
        if scope["type"] not in ("http", "websocket") or not peer or not self.proxies.trusts(peer[0]):
            await self.app(scope, receive, send)
            return
        address = self._client(peer[0], [value for key, value in scope["headers"] if key == FORWARDED_FOR])
        scope["client"] = (address, 0)
        scope.setdefault("state", {}).setdefault("log_extra", {})["client"] = address
        reason = self.clients.connect(address)
        if reason is not None:
            self.clients.refused(reason)
            write_access_line(f"connection refused client={address} status=429 outcome=overloaded reason={reason}")
            await _refuse(scope, send, self.clients.refusal_text(reason))
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.clients.disconnect(address)

    def _client(self, peer: str, values: list[bytes]) -> str:
        if not values:  # the proxy's own request (a health check), or one that forwards nothing
            return peer
        address = self.proxies.client_address(peer, values)
        if address is not None:
            return address
        self.metrics.forwarded_invalid.inc()
        self._unlogged += 1
        now = time.monotonic()
        if now - self._warned >= WARN_EVERY_S:
            header = b", ".join(values)
            log.warning(
                "X-Forwarded-For from trusted proxy %s cannot be read (%d such header(s) since the last warning; "
                "the proxy's address stands for the client): %r",
                peer,
                self._unlogged,
                header[:200] + (b"..." if len(header) > 200 else b""),
            )
            self._warned, self._unlogged = now, 0
        return peer


async def _refuse(scope: Scope, send: Send, message: str) -> None:
    """429 for a request, or for a WebSocket handshake (uvicorn's denial response), with retry-after."""
    body = message.encode()
    headers: list[tuple[bytes, bytes]] = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", b"1"),
    ]
    if scope["type"] == "websocket" and "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008, "reason": message})  # a server without denials: 403
        return
    prefix = "websocket.http" if scope["type"] == "websocket" else "http"
    start: dict[str, Any] = {"type": f"{prefix}.response.start", "status": 429, "headers": headers}
    await send(start)
    await send({"type": f"{prefix}.response.body", "body": body})
