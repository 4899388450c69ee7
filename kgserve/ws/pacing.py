"""How fast one WebSocket connection's messages are read: at most `websocket.max_messages_per_s` lines a second
for the connection and `limits.max_messages_per_s_per_client` for its client, all its connections together
(kgserve.admission.rates: a second's worth of burst, then the rate), and never two messages in one turn of the
event loop.

A message of n lines costs n (KataGo's protocol is a message a line). One past a bound is read only once the bound
allows: the connection reads nothing meanwhile, so what the client sends next waits in its own socket and then
in its own TCP buffers, costing kgserve nothing. The client is told, at most once every NOTICE_EVERY_S seconds
while it is over, with an error line without an id, KataGo's shape for a line that is not a query:
`{"error":"kgserve: over the limit of 1000 messages a second on this connection (websocket.max_messages_per_s);
its next messages are read at that rate"}`. Nothing is refused or lost.

The fair share: after each message the connection's task gives the event loop a turn (uvicorn hands over every
message of a socket read at once, thousands of small ones, and the loop turned only when they were all handled),
so other connections, /healthz and the engines' answers are served between two messages of a flood.
"""

from __future__ import annotations

import asyncio
import time

from kgserve.admission.rates import Rate, Rates
from kgserve.katago.protocol import error_line
from kgserve.metrics import Metrics
from kgserve.ws.sendbuffer import SendBuffer

__all__ = ["NOTICE_EVERY_S", "Pacing", "client_notice", "connection_notice"]

NOTICE_EVERY_S = 1.0


def connection_notice(rate: int) -> bytes:
    return error_line(
        f"kgserve: over the limit of {rate} messages a second on this connection (websocket.max_messages_per_s); "
        "its next messages are read at that rate"
    )


def client_notice(rate: int) -> bytes:
    return error_line(
        f"kgserve: over the limit of {rate} messages a second from this client, all its connections together "
        "(limits.max_messages_per_s_per_client); its next messages are read at that rate"
    )


class Pacing:
    """One connection's pace: `await pacing.admit(lines)` before its message of `lines` lines is handled."""

    def __init__(
        self, own_rate: int, rates: Rates, client_key: str, outbox: SendBuffer, metrics: Metrics, counts: dict[str, int]
    ) -> None:
        self.own = Rate(own_rate)
        self.rates = rates
        self.client_key = client_key
        self.outbox = outbox
        self.metrics = metrics
        self.counts = counts  # the connection's, for its access line: `paced`, the messages that waited for a bound
        counts["paced"] = 0
        self._told = -NOTICE_EVERY_S

    async def admit(self, lines: int) -> None:
        cost = max(1, lines)
        now = time.monotonic()
        own = self.own.take(cost, now)
        theirs = self.rates.take(self.client_key, cost, now)
        if not own and not theirs:
            await asyncio.sleep(0)  # the fair share: one message a turn of the event loop
            return
        self.counts["paced"] += 1
        bound = "connection" if own >= theirs else "client"
        self.metrics.websocket_paced(bound)
        if now - self._told >= NOTICE_EVERY_S:
            self._told = now
            rate = self.own.rate if bound == "connection" else self.rates.rate
            self.outbox.put(connection_notice(int(rate)) if bound == "connection" else client_notice(int(rate)))
        await asyncio.sleep(max(own, theirs))
