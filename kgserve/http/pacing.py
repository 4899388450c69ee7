"""How fast one client's HTTP requests are handled while other clients want the server too: at most
`limits.max_requests_per_s_per_client` a second, all its connections together, a second's worth at once
(kgserve.admission.rates; the client as for the per-client caps: its address, forwarded behind a trusted proxy, and
its token where auth is on).

Work-conserving (issue 40): the bound engages only while another client has a request in progress (they contend for
the event loop). A client alone is never paced, whatever its rate: the hot-path benchmark's single client got 1,123
req/s with the pacing on and 9,000 without, on a server with nothing else to do. Its bucket is not drawn from while it
is alone, so when a second client comes it starts with a second's worth, not a debt.

A request past the bound waits its turn before it is handled, and its response says how long it waited:
`X-Paced-Ms: <ms>` (access line `paced_ms=<ms>`, `kgserve_requests_paced_total`). It is not refused: a 429 costs
kgserve about what answering costs, the very work the bound is there to save, and a client told to retry comes
back at once. While it waits, its connection reads nothing more (uvicorn takes one request of a connection at a
time, and kgserve.http.httpguard parses a pipelined one only once the one before it is answered), so a client's
flood waits in its own sockets: one sleeping request per connection.
"""

from __future__ import annotations

from typing import Any

from kgserve.admission.clients import client_key
from kgserve.admission.rates import Rates

__all__ = ["PACED_HEADER", "RequestPacer"]

PACED_HEADER = b"x-paced-ms"


class RequestPacer:
    """The clients with HTTP requests in progress, and their buckets (taken from only while others have some)."""

    def __init__(self, rates: Rates) -> None:
        self.rates = rates
        self.active: dict[str, int] = {}  # requests in progress per client key

    @property
    def enabled(self) -> bool:
        return bool(self.rates.rate)

    def start(self, scope: Any, state: dict[str, Any]) -> tuple[str, float]:
        """Count a request in progress for its client: its key (for `finish`) and the seconds it must wait before it
        is handled (0: at once, always when no other client has a request in progress)."""
        client = scope.get("client")
        credential = state.get("credential")
        key = client_key(client[0] if client else None, credential.label if credential else None)
        active = self.active
        count = active.get(key, 0)
        active[key] = count + 1
        if len(active) == 1:  # this client alone
            return key, 0.0
        return key, self.rates.take(key, 1)

    def finish(self, key: str) -> None:
        count = self.active.get(key, 0) - 1
        if count > 0:
            self.active[key] = count
        else:
            self.active.pop(key, None)
