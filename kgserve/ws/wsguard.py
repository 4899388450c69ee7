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
  HTTP protocol that counted it before the upgrade: kgserve.http.httpguard).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

__all__ = ["CONNECTION_EXTENSION", "GuardedWebSocket", "guarded_websocket"]

CONNECTION_EXTENSION = "kgserve.connection"


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
        if not self.read_paused:
            self.transport.resume_reading()

    async def receive(self) -> Any:
        message = await super().receive()
        if self._write_paused:  # uvicorn resumed reading for its next message: not while the client reads nothing
            self.transport.pause_reading()
        return message

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
        super().connection_lost(exc)
        self.closed.set()
        release, self.release_connection = self.release_connection, None
        if release is not None:
            release()


def guarded_websocket(send_timeout_s: float) -> type[GuardedWebSocket]:
    """The protocol class for uvicorn.Config(ws=...), with this send timeout."""
    return type("KgserveWebSocket", (GuardedWebSocket,), {"send_timeout_s": send_timeout_s})
