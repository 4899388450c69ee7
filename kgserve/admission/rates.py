"""Message rates: how many lines of KataGo's protocol one WebSocket connection (`websocket.max_messages_per_s`) and
one client, all its connections together (`limits.max_messages_per_s_per_client`), may send a second.

Issue 36: one connection sending ~60,000 small invalid lines a second, reading every answer (so no send-buffer
guard tripped), took the event loop from everyone: kgserve answered each line as fast as it could read it. A
`Rate` is a token bucket that lends: `take(cost)` always takes, and says how long the sender must wait before it
is read again (0: at once). So a flood is slowed to the rate, its further messages left in its own socket (TCP's
backpressure: they cost kgserve nothing), rather than refused one by one (a refusal is an answer line each, the
very work the bound is there to save); nothing is lost. The burst is a second's worth: what a client sends at
once (KaTrain: one query per node of a game it opens, one per point of a sweep) passes without waiting, up to
`rate` lines.

`Rates` holds one bucket per client key for as long as it is below full: a bucket back to full is the same as
none, so the table holds only the clients that sent something in about the last second (it is swept when it has
grown by SWEEP_EVERY entries), and a client cannot start afresh by closing its connections and opening new ones.
"""

from __future__ import annotations

import time

__all__ = ["SWEEP_EVERY", "Rate", "Rates"]

SWEEP_EVERY = 1024  # entries added between sweeps of the full buckets


class Rate:
    """`rate` lines a second, `rate` of burst; 0: no bound (every take is free)."""

    __slots__ = ("rate", "stamp", "tokens")

    def __init__(self, rate: float, now: float | None = None) -> None:
        self.rate = rate
        self.tokens = rate
        self.stamp = time.monotonic() if now is None else now

    def take(self, cost: float, now: float | None = None) -> float:
        """Take `cost` lines; the seconds to wait before the next is read (0: at once). A take past the burst is
        lent: the tokens go below zero and the wait is what refills them."""
        if not self.rate:
            return 0.0
        now = time.monotonic() if now is None else now
        self.tokens = min(self.rate, self.tokens + (now - self.stamp) * self.rate) - cost
        self.stamp = now
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate

    def full(self, now: float) -> bool:
        return self.tokens + (now - self.stamp) * self.rate >= self.rate


class Rates:
    """A Rate per client key (`limits.max_messages_per_s_per_client`), kept while it is below full."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.buckets: dict[str, Rate] = {}
        self._sweep_at = SWEEP_EVERY

    def take(self, key: str, cost: float, now: float | None = None) -> float:
        """Take `cost` lines from client `key`'s bucket; the seconds it must wait (0: at once)."""
        if not self.rate:
            return 0.0
        now = time.monotonic() if now is None else now
        bucket = self.buckets.get(key)
        if bucket is None:
            if len(self.buckets) >= self._sweep_at:
                self.sweep(now)
            bucket = self.buckets[key] = Rate(self.rate, now)
        return bucket.take(cost, now)

    def sweep(self, now: float | None = None) -> None:
        """Drop the buckets that are full again (as good as none)."""
        now = time.monotonic() if now is None else now
        self.buckets = {key: bucket for key, bucket in self.buckets.items() if not bucket.full(now)}
        self._sweep_at = len(self.buckets) + SWEEP_EVERY
