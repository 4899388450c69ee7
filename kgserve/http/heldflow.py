"""uvicorn's read flow control for one HTTP connection, with a second reason to stop reading: the guard holds bytes
it has not parsed yet (kgserve.http.httpguard parses a connection's pipelined requests one at a time).

uvicorn pauses reading while a request is pipelined behind the one in progress, and resumes it as soon as a
response is complete, though more pipelined requests may still be queued: each response then let one more socket
read in (up to 256 KiB, ~4,400 small requests parsed at once into request objects), so a client pipelining small
requests grew kgserve without bound (issue 36: +368 MB of RSS in 15 s from one client) and stalled everyone while
it was parsed. Here the socket is read only when uvicorn wants it read and the guard holds nothing.
"""

from __future__ import annotations

from uvicorn.protocols.http.flow_control import FlowControl

__all__ = ["HeldFlow"]


class HeldFlow(FlowControl):
    """The transport reads while neither uvicorn (`read_paused`) nor the guard (`held`) has stopped it."""

    held = False

    def _set(self, *, read_paused: bool | None = None, held: bool | None = None) -> None:
        """Change either reason; the transport pauses or resumes only when whether any reason holds changes."""
        stopped = self.read_paused or self.held
        if read_paused is not None:
            self.read_paused = read_paused
        if held is not None:
            self.held = held
        if self.read_paused or self.held:
            if not stopped:
                self._transport.pause_reading()
        elif stopped:
            self._transport.resume_reading()

    def pause_reading(self) -> None:
        self._set(read_paused=True)

    def resume_reading(self) -> None:
        self._set(read_paused=False)

    def hold(self) -> None:
        """Read nothing more until `release`: the guard has bytes of this connection still to parse."""
        self._set(held=True)

    def release(self) -> None:
        self._set(held=False)
