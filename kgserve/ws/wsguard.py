"""uvicorn's WebSocket protocol (websockets' sans-I/O implementation) with the bounds it lacks for a client that
does not read.

uvicorn writes a pong for every ping as it comes, whatever its client has left unread, and closes a connection
with `transport.close()`, which keeps the socket (and its send buffer) until the client reads it all. So a client
that sends pings and never reads grew kgserve's memory without bound, and one cut off for not reading kept its
socket for as long as it lived (issue 27, attacks 2 and 4). `guarded_websocket(...)` is a protocol class for
uvicorn.Config(ws=...) that:

- while the transport's buffer is over its high-water mark (the client is not reading), stops reading the
  client too (its pings wait in its own socket) and answers no ping (a pong is dropped, as a client that
  does not read would never see it);
- resets the connection (TCP RST, the socket and its buffer freed at once) when the client has taken nothing
  for `server.send_timeout_s`;
- offers the app `scope["extensions"]["kgserve.connection"]`: `abort` (reset now), `closed` (an event set when
  the connection is gone), and `on_shutdown`, a callback the server's shutdown calls instead of closing the
  connection with 1012 at once (kgserve.ws.wsconnection drains its queries within the grace period, then closes
  with 1001);
- gives its client's connection back to the per-client count when it ends (`release_connection`, set by the
  HTTP protocol that counted it before the upgrade: kgserve.http.httpguard);
- parses what the client sent a little at a time: at most FRAMES_PER_TURN frames (or BYTES_PER_TURN bytes) in
  one turn of the event loop, and none while the app has FRAMES_PER_TURN messages still to read. uvicorn parses a
  whole socket read at once, and a read holds up to 256 KiB: ~37,000 one-byte messages parsed and queued in one
  callback, then handled by the app without the loop turning (issue 36: another client's query took 3.2 s
  instead of 0.021 s). What waits is kept as it came (bytes, not messages), and reading from the socket stops
  until it is parsed, so a connection holds at most one read of unparsed bytes and FRAMES_PER_TURN messages more
  than its app has taken (the pace at which the app takes them: kgserve.ws.pacing).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

__all__ = ["BYTES_PER_TURN", "CONNECTION_EXTENSION", "FRAMES_PER_TURN", "GuardedWebSocket", "guarded_websocket"]

CONNECTION_EXTENSION = "kgserve.connection"
FEED_BYTES = 1024  # bytes handed to the frame parser at a time (at most ~170 frames: the smallest is 6 bytes)
FRAMES_PER_TURN = 64  # frames parsed in one turn of the event loop, and messages the app may have waiting
BYTES_PER_TURN = 65536  # bytes parsed in one turn (a big message takes a few turns, each a share of the loop)


class GuardedWebSocket(WebSocketsSansIOProtocol):
    send_timeout_s: float = 30.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        # set by the HTTP protocol that upgraded the connection (kgserve.http.httpguard): gives its count back
        self.release_connection: Callable[[], None] | None = None
        self._stall: asyncio.TimerHandle | None = None
        self._write_paused = False
        self._on_shutdown: Callable[[], None] | None = None
        self.closed = asyncio.Event()  # the connection is gone (connection_lost)
        self.dropped_pongs = 0
        self._unparsed = bytearray()  # what the client sent that is not parsed yet
        self._feeding: asyncio.Handle | None = None  # the next turn's parse
        self._frames = 0  # frames parsed this turn

    def handle_connect(self, event: Any) -> None:
        super().handle_connect(event)
        scope = getattr(self, "scope", None)
        if scope is not None:  # the upgrade went through: the app's task has the scope (it has not run yet)
            scope["extensions"][CONNECTION_EXTENSION] = {
                "abort": self.reset,
                "on_shutdown": self._register,
                "closed": self.closed,
            }

    def _register(self, callback: Callable[[], None] | None) -> None:
        self._on_shutdown = callback

    # -- a client that does not read -------------------------------------------------------------------------
    def pause_writing(self) -> None:
        super().pause_writing()
        self._write_paused = True
        self.transport.pause_reading()
        if self._stall is None:
            self._stall = self.loop.call_later(self.send_timeout_s, self.reset)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._write_paused = False
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None
        if self._unparsed:
            self._feed_soon()
        elif not self.read_paused:
            self.transport.resume_reading()

    async def receive(self) -> Any:
        message = await super().receive()
        # uvicorn resumed reading for its next message: not while the client reads nothing, nor while what it sent
        # before is still to be parsed (that comes first)
        if (self._write_paused or self._unparsed) and not self.transport.is_closing():
            self.transport.pause_reading()
        if self._unparsed:
            self._feed_soon()
        return message

    # -- a client that sends much ------------------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        self._unparsed += data
        if self._feeding is None:
            self._feed()

    def handle_events(self) -> None:
        self._frames += len(self.conn.events)  # the frames (and the handshake) this parse produced
        super().handle_events()

    def _feed_soon(self) -> None:
        """Parse more in the next turn of the event loop, if the app has taken what was parsed before."""
        if self._feeding is None and not self._write_paused and self.queue.qsize() < FRAMES_PER_TURN:
            self._feeding = self.loop.call_soon(self._feed)

    def _feed(self) -> None:
        """Parse this turn's share of what waits: FRAMES_PER_TURN frames or BYTES_PER_TURN bytes at most."""
        self._feeding = None
        self._frames = fed = 0
        while (
            self._unparsed
            and self._frames < FRAMES_PER_TURN
            and fed < BYTES_PER_TURN
            and self.queue.qsize() < FRAMES_PER_TURN
            and not self._write_paused
        ):
            if self.transport.is_closing():  # closed (a close frame, a parser error): the rest is never read
                break
            chunk = bytes(self._unparsed[:FEED_BYTES])
            del self._unparsed[:FEED_BYTES]
            fed += len(chunk)
            super().data_received(chunk)
        if self.transport.is_closing():
            self._unparsed.clear()
        elif not self._unparsed:
            if not self.read_paused and not self._write_paused:
                self.transport.resume_reading()
        else:
            self.transport.pause_reading()  # nothing more from the socket until this is parsed
            self._feed_soon()  # (or when the app has read its messages: receive(), or when writing resumes)

    def handle_ping(self) -> None:
        if self._write_paused:
            self.conn.data_to_send()  # the pong, dropped
            self.dropped_pongs += 1
            return
        super().handle_ping()

    def reset(self) -> None:
        """Drop the connection at once with a TCP reset: close() would keep the socket until the client read
        what waits for it."""
        self._stall = None
        if self.transport.is_closing() and self.disconnected:
            return
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()

    # -- shutdown and the end ----------------------------------------------------------------------------------
    def shutdown(self) -> None:
        if self._on_shutdown is not None and self.handshake_complete and not self.close_sent:
            self.stop_keepalive()
            callback, self._on_shutdown = self._on_shutdown, None
            callback()  # the app drains its queries and closes the connection itself (1001)
            return
        super().shutdown()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None
        if self._feeding is not None:
            self._feeding.cancel()
            self._feeding = None
        self._unparsed.clear()
        super().connection_lost(exc)
        self.closed.set()
        release, self.release_connection = self.release_connection, None
        if release is not None:
            release()


def guarded_websocket(send_timeout_s: float) -> type[GuardedWebSocket]:
    """The protocol class for uvicorn.Config(ws=...), with this send timeout."""
    return type("KgserveWebSocket", (GuardedWebSocket,), {"send_timeout_s": send_timeout_s})
