"""One socket write for a response whose head and body are sent in one go (kgserve.http.outbox).

uvicorn's httptools protocol writes the status line and headers when the app sends `http.response.start`,
and the body on each `http.response.body`: two `send` system calls (and two TCP segments) for a response
that is complete at once, the common case on kgserve's hot path. `HeldWrites` stands in for the request
cycle's transport while the outbox hands it such a batch of messages: the cycle's writes are kept and go
out joined, as one write, when the batch ends (`release`, in the same call: nothing is held across an
await). Everything else (`is_closing`, `get_extra_info`, ...) goes to the real transport.

It relies on uvicorn's RequestResponseCycle writing through its `transport` attribute (uvicorn 0.3x);
`hold_writes` checks that the attribute is the connection's transport and otherwise holds nothing, so an
uvicorn that writes elsewhere just sends the messages as they come (tests/kgserve/http/test_heldwrites.py
pins the one-write behaviour against the installed uvicorn).
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["HeldWrites", "hold_writes"]


class HeldWrites:
    __slots__ = ("_close", "_cycle", "_parts", "_transport")

    def __init__(self, cycle: Any, transport: asyncio.Transport) -> None:
        self._cycle = cycle
        self._transport = transport
        self._parts: list[bytes] = []
        self._close = False

    def write(self, data: bytes) -> None:
        self._parts.append(data)

    def close(self) -> None:  # a response with `connection: close`: after its bytes
        self._close = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def release(self) -> None:
        """The cycle writes to its transport again; what it wrote meanwhile goes out in one write."""
        if self._cycle.transport is self:
            self._cycle.transport = self._transport
        parts = self._parts
        if parts:
            self._transport.write(parts[0] if len(parts) == 1 else b"".join(parts))
            parts.clear()
        if self._close:
            self._transport.close()


def hold_writes(cycle: Any, transport: asyncio.Transport) -> HeldWrites | None:
    """Hold the writes of `cycle` (a uvicorn request cycle of the connection on `transport`) until release();
    None, holding nothing, when the cycle does not write through that transport."""
    if getattr(cycle, "transport", None) is not transport or transport.is_closing():
        return None
    held = HeldWrites(cycle, transport)
    cycle.transport = held
    return held
