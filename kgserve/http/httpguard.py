"""uvicorn's httptools protocol with the connection limits uvicorn lacks (server.* in runtime/config.yaml).

uvicorn bounds nothing a client sends before a request is complete: no time limit for headers or a
body, and with httptools (its fast parser, kept here) no header size limit. `guarded_protocol(limits)`
is a protocol class for uvicorn.Config(http=...) that:

- closes a connection whose request headers are not complete `header_timeout_s` after it opened, or
  after the first byte of a later request (408 when part of a request came, nothing when none did);
- answers 400 and closes when a request's line and headers pass `max_header_bytes` (counted here, on
  the bytes received, pipelined requests included, before the parser buffers them);
- answers 408 and closes when a body is not complete `body_timeout_s` after its headers; the app
  sees a disconnect (and `scope["state"]["kgserve_timeout"] == "body"`);
- resets a connection whose client has taken none of the response for `send_timeout_s` (the
  transport's buffer stays above its high-water mark): its app sees a disconnect, and nothing waits
  on a blocked send any more;
- offers the app `scope["extensions"]["kgserve.connection"]["abort"]`, to drop a client at once,
  `["on_disconnect"]`, to be called back when the client goes (instead of a task awaiting receive()), and
  `["hold_writes"]`, to send a response's head and body in one write (kgserve.http.heldwrites);
- lets go of a connection upgraded to a WebSocket (its timers are cancelled: kgserve.ws.wsguard has its own
  bounds);
- answers 429 and closes a new connection only past the server's connection budget (its file-descriptor limit), or,
  in that budget's last share (kept for newcomers), from an address that has `limits.max_connections_per_client`
  open already (kgserve.admission.clients; a WebSocket's connection counts until it ends): an access line
  (`connection refused client=... reason=...`) and `kgserve_refusals_total{reason}` say so. While descriptors are
  free, an address opens as many connections as it likes (issue 40: a batch client's 512). A trusted proxy's
  connections (`server.trusted_proxies`) are not counted: kgserve.forwarded counts its requests, each for the
  client it names.
- lets go of the body bytes uvicorn received for a request the app did not read (refused on its
  Content-Length) as soon as the connection is lost, instead of when the garbage collector gets to it;
- parses what a client sent a little at a time (FEED_BYTES at once, BYTES_PER_TURN in one turn of the event loop),
  and a pipelined request only once the request before it is answered: what follows waits as bytes, and the
  socket is not read meanwhile (kgserve.http.heldflow). uvicorn parsed a whole read at once and read again after
  each response, so a client pipelining small requests had thousands parsed into request objects per response
  (issue 36: +368 MB of RSS in 15 s, /healthz 5.4 s).

Idle keep-alive connections are closed by uvicorn after `keep_alive_timeout_s`. (h11 would add its own
header bound and HTTP/1.0 framing, but costs about 140 µs more CPU per request: kgserve.http.analysis frames
HTTP/1.0 responses itself.)
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from kgserve.admission.clients import ClientTable
from kgserve.admission.proxies import TrustedProxies
from kgserve.http.heldflow import HeldFlow
from kgserve.http.heldwrites import HeldWrites, hold_writes
from kgserve.logformat import write_access_line
from kgserve.settings import ServerSettings

__all__ = [
    "CONNECTION_EXTENSION",
    "ConnectionLimits",
    "GuardedProtocol",
    "abort_connection",
    "body_timeout_text",
    "guarded_protocol",
    "on_disconnect",
    "writes_holder",
]

CONNECTION_EXTENSION = "kgserve.connection"
_HEAD_END = b"\r\n\r\n"
_CLOSING = b"content-type: text/plain\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
_REQUEST_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\n" + _CLOSING
_HEADERS_TOO_LARGE = b"HTTP/1.1 400 Bad Request\r\n" + _CLOSING
_TOO_MANY = b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 1\r\n" + _CLOSING
FEED_BYTES = 2048  # bytes handed to the parser at a time: a pipelined burst parsed ahead is at most ~36 requests
BYTES_PER_TURN = 65536  # bytes parsed in one turn of the event loop (a 1 MiB body takes 16 turns)


@dataclass(frozen=True)
class ConnectionLimits:
    max_header_bytes: int = 16384
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    send_timeout_s: float = 30.0

    @classmethod
    def from_settings(cls, server: ServerSettings) -> ConnectionLimits:
        return cls(
            max_header_bytes=server.max_header_bytes,
            header_timeout_s=server.header_timeout_s,
            body_timeout_s=server.body_timeout_s,
            send_timeout_s=server.send_timeout_s,
        )


def abort_connection(scope: Any) -> bool:
    """Drop the request's connection at once (no flush); False when the server offers no way to."""
    extension = (scope.get("extensions") or {}).get(CONNECTION_EXTENSION)
    if not extension:
        return False
    abort: Callable[[], None] = extension["abort"]
    abort()
    return True


def writes_holder(scope: Any) -> Callable[[], HeldWrites | None] | None:
    """What holds the request's writes for one batch of sends (kgserve.http.heldwrites); None when the server
    offers no such thing (then each message is written as it is sent)."""
    extension = (scope.get("extensions") or {}).get(CONNECTION_EXTENSION)
    holder: Callable[[Any], HeldWrites | None] | None = extension.get("hold_writes") if extension else None
    return partial(holder, scope) if holder is not None else None


def on_disconnect(scope: Any, callback: Callable[[], None], *, forget: bool = False) -> bool:
    """Have `callback` called once when the request's client goes (at once if it has gone already), or with
    `forget`, no longer. False when the server offers no such hook (then await receive() for http.disconnect)."""
    extension = (scope.get("extensions") or {}).get(CONNECTION_EXTENSION)
    if not extension:
        return False
    register: Callable[[Callable[[], None], bool], None] = extension["on_disconnect"]
    register(callback, forget)
    return True


def _body_timeout_message(seconds: float) -> str:
    return f"request body not complete within {seconds:g}s (server.body_timeout_s)"


def body_timeout_text(server: ServerSettings) -> str:
    """The 408 body a client gets when its request body is late (documented in kgserve.http.openapi)."""
    return _body_timeout_message(server.body_timeout_s)


def _plain(template: bytes, text: str) -> bytes:
    body = text.encode("ascii")
    return template % (len(body), body)


class _RequestGuard(HttpToolsProtocol):
    """uvicorn's protocol with each request bounded: the header and body timers, the head's size, a client that
    reads nothing of its response, and the hooks offered to the app (CONNECTION_EXTENSION). GuardedProtocol adds
    what concerns the connection as a whole: whether it is let in, and how its bytes are fed to `_parse`."""

    limits = ConnectionLimits()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._guard_timer: asyncio.TimerHandle | None = None
        self._stall_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0  # bytes of the request head being received (no request in progress)
        self._head_tail = b""
        self._guarded_cycle: Any = None
        self._on_disconnect: set[Callable[[], None]] = set()  # requests of this connection to tell when it goes
        self._arm(self.limits.header_timeout_s, self._header_timeout)

    # -- timers --------------------------------------------------------------------------------------
    def _arm(self, seconds: float, callback: Callable[[], None]) -> None:
        self._disarm()
        self._guard_timer = self.loop.call_later(seconds, callback)

    def _disarm(self) -> None:
        if self._guard_timer is not None:
            self._guard_timer.cancel()
            self._guard_timer = None

    def _idle(self) -> bool:
        """No request in progress (its response is complete): the connection waits for a new request."""
        return self.cycle is None or self.cycle.response_complete

    def _in_head(self) -> bool:
        """The current request is fully received: the next bytes are a new (maybe pipelined) request's head."""
        return self.cycle is None or not self.cycle.more_body

    def _header_timeout(self) -> None:
        self._guard_timer = None
        if self.transport.is_closing():
            return
        if self._head_bytes:
            message = f"request headers not complete within {self.limits.header_timeout_s:g}s (server.header_timeout_s)"
            self.transport.write(_plain(_REQUEST_TIMEOUT, message))
        self.transport.close()

    def _body_timeout(self) -> None:
        self._guard_timer = None
        cycle = self.cycle
        if self.transport.is_closing() or cycle is None or not cycle.more_body:
            return
        cycle.scope["state"]["kgserve_timeout"] = "body"
        if not cycle.response_started:
            self.transport.write(_plain(_REQUEST_TIMEOUT, _body_timeout_message(self.limits.body_timeout_s)))
        cycle.disconnected = True  # the app's receive says http.disconnect, its sends are dropped
        cycle.message_event.set()
        self._client_gone()
        self.transport.close()

    def _stalled(self) -> None:
        self._stall_timer = None
        self._reset()

    def _reset(self) -> None:
        """Drop the connection with a TCP reset: a plain close would keep what the client did not read in
        the kernel's send buffer (and the client would see nothing until it read it all)."""
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True  # now, not when connection_lost runs: the app may return at once
            self.cycle.message_event.set()
        self._client_gone()
        self.transport.abort()

    def _watch_disconnect(self, callback: Callable[[], None], forget: bool) -> None:
        if forget:
            self._on_disconnect.discard(callback)
            return
        self._on_disconnect.add(callback)
        if self.cycle is None or self.cycle.disconnected or self.transport.is_closing():
            self._client_gone()

    def _hold_writes(self, scope: Any) -> HeldWrites | None:
        """Hold the writes of the request whose scope this is, when it is the connection's current one (not while
        pipelined requests wait: then the current cycle is a later one). The scope refers to this method, not
        to its cycle: a cycle referring to itself would leave each request's objects to the garbage collector."""
        cycle = self.cycle
        if cycle is None or getattr(cycle, "scope", None) is not scope:
            return None
        return hold_writes(cycle, self.transport)

    def _client_gone(self) -> None:
        callbacks = list(self._on_disconnect)
        self._on_disconnect.clear()
        for callback in callbacks:
            callback()

    # -- protocol events -----------------------------------------------------------------------------
    def _parse(self, data: bytes) -> None:
        if self._idle() and self._guard_timer is None:  # the first byte of a request after a keep-alive pause
            self._arm(self.limits.header_timeout_s, self._header_timeout)
        if self._in_head() and self._head_too_large(data):
            return
        super().data_received(data)
        self._follow()

    def _head_too_large(self, data: bytes) -> bool:
        window = self._head_tail + data
        end = window.find(_HEAD_END)
        size = self._head_bytes + (len(data) if end < 0 else end + len(_HEAD_END) - len(self._head_tail))
        if size > self.limits.max_header_bytes:
            self._disarm()
            message = f"request line and headers over {self.limits.max_header_bytes} bytes (server.max_header_bytes)"
            self.transport.write(_plain(_HEADERS_TOO_LARGE, message))
            self.transport.close()
            return True
        self._head_bytes = size if end < 0 else 0
        self._head_tail = window[-3:] if end < 0 else b""
        return False

    def _follow(self) -> None:
        """After the parser has run: a new request's headers are complete, or its body is."""
        cycle = self.cycle
        if cycle is None:
            return
        if cycle is not self._guarded_cycle:  # a new request's headers are complete
            self._guarded_cycle = cycle
            self._head_bytes = 0
            self._head_tail = b""
            extensions = cycle.scope.setdefault("extensions", {})
            extensions[CONNECTION_EXTENSION] = {
                "abort": self._reset,
                "on_disconnect": self._watch_disconnect,
                "hold_writes": self._hold_writes,
            }
            if cycle.more_body:
                self._arm(self.limits.body_timeout_s, self._body_timeout)
            else:
                self._body_complete()
        elif not cycle.more_body and not self._idle():
            self._body_complete()

    def _body_complete(self) -> None:
        # from here the request's own deadline governs. And reading goes on: uvicorn pauses it while over 64 KiB of
        # body wait for the app, and resumes it only when the app reads again; the app has read the whole body and
        # will not, so a client that leaves (FIN) would go unseen (CLOSE-WAIT) and its queries run on. The next
        # pipelined request pauses reading again (uvicorn), and its head is bounded here.
        self._disarm()
        self.flow.resume_reading()

    def handle_websocket_upgrade(self) -> None:
        # the connection belongs to the WebSocket protocol from here (kgserve.ws.wsguard bounds its own sends):
        # a header timer still armed would close a long-lived, mostly idle connection (KaTrain's)
        self._disarm()
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
        super().handle_websocket_upgrade()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()  # a pipelined request may have started

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stall_timer is None:
            self._stall_timer = self.loop.call_later(self.limits.send_timeout_s, self._stalled)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
        super().connection_lost(exc)
        self._drop_unread_body()
        self._client_gone()

    def _drop_unread_body(self) -> None:
        """Free the body bytes uvicorn received for a request the app will not read any more (it refused the
        request before reading its body: 429 on its Content-Length, then close). The protocol, its cycle and its
        transport refer to one another, so without this the bytes (~120 KB a connection in the memory attack:
        uvicorn pauses reading only past 64 KiB, after a read of up to 256 KiB) lived until the garbage collector's
        next full collection, long after the burst and the budget's malloc_trim: 15-19 MB of RSS after the
        second-round memory attack (docs/http-limits.md). Once the connection is lost, receive() answers only
        http.disconnect, so nothing can read them."""
        if self.cycle is not None:
            self.cycle.body = bytearray()  # (a pipelined request's body is left alone: its app still runs)


class GuardedProtocol(_RequestGuard):
    """The connection as a whole, on top of each request's bounds: whether it is let in (counted for its address, or
    refused with 429), and its bytes parsed a little at a time, a pipelined request once the one before it is
    answered (kgserve.http.heldflow holds the socket's reading meanwhile)."""

    clients: ClientTable | None = None  # per-address connection counts (limits.max_connections_per_client)
    # server.trusted_proxies: their connections are not counted here; kgserve.forwarded counts each of their
    # requests for the client it was forwarded for
    proxies: TrustedProxies | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.flow: HeldFlow = HeldFlow(transport)
        self._unparsed = bytearray()  # received, not parsed yet (a pipelined request waits here as bytes)
        self._feeding: asyncio.Handle | None = None  # the next turn's parse
        self._counted: str | None = None  # the address this connection is counted for
        host = self.client[0] if self.client else None
        if self.clients is not None and not (self.proxies and self.proxies.trusts(host)):
            reason = self.clients.connect(host)
            if reason is not None:
                self._over_connections(host or "-", reason)
                return
            self._counted = host or "-"

    def _over_connections(self, host: str, reason: str) -> None:
        """Over the connection budget (or the client's cap in its last share): 429 and the connection closed before
        anything is read; an access line and a metric say so."""
        assert self.clients is not None
        self._disarm()  # (its header timer: nothing is read from a refused connection)
        self.clients.refused(reason)
        write_access_line(f"connection refused client={host} status=429 outcome=overloaded reason={reason}")
        self.transport.write(_plain(_TOO_MANY, self.clients.refusal_text(reason)))
        self.transport.close()

    def _uncount(self) -> None:
        counted, self._counted = self._counted, None
        if counted is not None and self.clients is not None:
            self.clients.disconnect(counted)

    def data_received(self, data: bytes) -> None:
        self._unparsed += data
        if self._feeding is None:
            self._feed()

    def _request_waiting(self) -> bool:
        """The current request is received in full and not yet answered: what follows is a pipelined request."""
        cycle = self.cycle
        return cycle is not None and not cycle.more_body and not cycle.response_complete

    def _feed(self) -> None:
        """Parse this turn's share of what the client sent, up to a pipelined request (parsed once the request
        before it is answered: on_response_complete)."""
        self._feeding = None
        fed = 0
        while self._unparsed and fed < BYTES_PER_TURN and not self._request_waiting():
            if self.transport.is_closing() or self.transport.get_protocol() is not self:  # closed, or upgraded
                break
            chunk = bytes(self._unparsed[:FEED_BYTES])
            del self._unparsed[:FEED_BYTES]
            fed += len(chunk)
            self._parse(chunk)
        if self.transport.is_closing() or self.transport.get_protocol() is not self or not self._unparsed:
            self._unparsed.clear()  # (after an upgrade, handle_websocket_upgrade passed them on)
            self.flow.release()
            return
        self.flow.hold()  # nothing more from the socket until this is parsed
        if not self._request_waiting():
            self._feeding = self.loop.call_soon(self._feed)

    def handle_websocket_upgrade(self) -> None:
        super().handle_websocket_upgrade()
        protocol = self.transport.get_protocol()
        if protocol is not self and hasattr(protocol, "release_connection"):
            protocol.release_connection = self._uncount  # the WebSocket gives the connection's count back
        else:
            self._uncount()
        if protocol is not self:  # what the client sent after its handshake, not parsed yet, is the WebSocket's
            rest = bytes(self._unparsed)
            self._unparsed.clear()
            self.flow.release()
            if rest and isinstance(protocol, asyncio.Protocol):
                protocol.data_received(rest)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._unparsed and self._feeding is None and not self.transport.is_closing():
            self._feeding = self.loop.call_soon(self._feed)  # the next pipelined request, in the next turn

    def connection_lost(self, exc: Exception | None) -> None:
        self._uncount()
        if self._feeding is not None:
            self._feeding.cancel()
            self._feeding = None
        self._unparsed.clear()
        super().connection_lost(exc)


def guarded_protocol(
    limits: ConnectionLimits, clients: ClientTable | None = None, proxies: TrustedProxies | None = None
) -> type[GuardedProtocol]:
    """The protocol class for uvicorn.Config(http=...), with these limits (and these clients' connection caps, which
    the connections of these trusted proxies are left out of)."""
    return type("KgserveProtocol", (GuardedProtocol,), {"limits": limits, "clients": clients, "proxies": proxies})
