"""How fast one client's HTTP requests are handled: at most `limits.max_requests_per_s_per_client` a second, all its
connections together, a second's worth at once (kgserve.admission.rates; the client as for the per-client caps:
its address, forwarded behind a trusted proxy, and its token where auth is on).

A request past the bound waits its turn before it is handled, and its response says how long it waited:
`X-Paced-Ms: <ms>` (access line `paced_ms=<ms>`, `kgserve_requests_paced_total`). It is not refused: a 429 costs
kgserve about what answering costs, the very work the bound is there to save, and a client told to retry comes
back at once. While it waits, its connection reads nothing more (uvicorn takes one request of a connection at a
time, and kgserve.http.httpguard parses a pipelined one only once the one before it is answered), so a client's
flood waits in its own sockets: one sleeping request per connection, `limits.max_connections_per_client` at most.
"""

from __future__ import annotations

from typing import Any

from kgserve.admission.clients import client_key
from kgserve.admission.rates import Rates

__all__ = ["PACED_HEADER", "request_wait"]

PACED_HEADER = b"x-paced-ms"


def request_wait(rates: Rates, scope: Any, state: dict[str, Any]) -> float:
    """Take a request from its client's bucket: the seconds it must wait before it is handled (0: at once)."""
    if not rates.rate:
        return 0.0
    client = scope.get("client")
    credential = state.get("credential")
    return rates.take(client_key(client[0] if client else None, credential.label if credential else None), 1)
