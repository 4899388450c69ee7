"""The server-wide bound on queries in flight (`limits.max_inflight_queries`), shared by POST /analysis and /ws.

A request or message over it is refused at once (HTTP 429 with Retry-After, an error line over /ws): nothing
queues in kgserve, so a client sees the overload instead of a growing latency.
"""

from __future__ import annotations

__all__ = ["Admission"]


class Admission:
    """Counts queries in flight; `try_acquire` refuses at once instead of queueing."""

    def __init__(self, max_inflight: int) -> None:
        self.max_inflight = max_inflight
        self.inflight = 0

    def try_acquire(self, queries: int) -> bool:
        if self.inflight + queries > self.max_inflight:
            return False
        self.inflight += queries
        return True

    def release(self, queries: int) -> None:
        self.inflight = max(0, self.inflight - queries)
