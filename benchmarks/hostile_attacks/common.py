"""What the hostile-client attacks share: attacker addresses, raw sockets and WebSockets, kgserve's metrics, the
result of one attack.

Every attacker connects from an address of its own on loopback (127.0.1.1, 127.0.1.2, ...; Linux routes all of
127/8 to lo), and the well-behaved client from 127.0.0.1: kgserve's per-client caps (issue 27) tell them apart as
they would tell a real attacker from everyone else.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import socket
import struct
from dataclasses import dataclass, field
from typing import Any

import aiohttp

__all__ = [
    "PROBE",
    "AttackContext",
    "Outcome",
    "attacker",
    "metric",
    "open_raw",
    "peer_gone",
    "raw_websocket",
    "session_from",
    "until_closed",
    "ws_frame",
]

PROBE = b'{"id":"probe","moves":[],"rules":"chinese","komi":7.5,"boardXSize":9,"boardYSize":9,"maxVisits":5}'
_TCP_ESTABLISHED = 1


def attacker(index: int) -> str:
    """The loopback address of attacker `index` (never 127.0.0.1, the well-behaved client's)."""
    return f"127.0.{1 + index // 250}.{1 + index % 250}"


@dataclass
class AttackContext:
    url: str
    port: int
    pid: int
    args: Any  # the command line (argparse.Namespace)
    settings: Any  # the kgserve Settings the server runs with
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Outcome:
    """What one attack did: connections it opened and kgserve closed (None: not a connection attack), checks of
    kgserve's behaviour (all must hold), and figures for the table."""

    opened: int | None = None
    closed: int | None = None
    checks: dict[str, bool] = field(default_factory=dict)
    figures: list[str] = field(default_factory=list)
    peak_rss_mb: float | None = None


async def metric(url: str, name: str) -> float:
    async with aiohttp.ClientSession() as session, session.get(url + "/metrics") as response:
        text = await response.text()
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return float("nan")


def session_from(address: str, **kwargs: Any) -> aiohttp.ClientSession:
    """An aiohttp session whose connections come from `address`."""
    connector = aiohttp.TCPConnector(local_addr=(address, 0), limit=0, force_close=False)
    return aiohttp.ClientSession(connector=connector, **kwargs)


async def until_closed(reader: asyncio.StreamReader) -> None:
    """Read (and drop) until the server closes the connection."""
    with contextlib.suppress(ConnectionError):
        while await reader.read(65536):
            pass


async def open_raw(
    port: int, rcvbuf: int | None = None, local: str | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A TCP connection to kgserve from `local` (an attacker's address), with a small receive buffer if asked."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    if local is not None:
        sock.bind((local, 0))
    sock.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    except BaseException:
        sock.close()
        raise
    return await asyncio.open_connection(sock=sock, limit=1 << 22)


def peer_gone(writer: asyncio.StreamWriter) -> bool:
    """Whether the server has closed or reset the connection, without reading what it sent (TCP_INFO)."""
    sock = writer.get_extra_info("socket")
    if sock is None:
        return True
    try:
        state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]
    except OSError:
        return True
    return bool(state != _TCP_ESTABLISHED)


def ws_frame(opcode: int, payload: bytes) -> bytes:
    """One masked client frame (FIN set)."""
    mask = os.urandom(4)
    size = len(payload)
    head = bytes([0x80 | opcode])
    if size < 126:
        head += bytes([0x80 | size])
    elif size < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", size)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", size)
    if not size:
        return head + mask
    full = (mask * (size // 4 + 1))[:size]
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(full, "big")).to_bytes(size, "big")
    return head + mask + masked


async def raw_websocket(
    port: int, local: str, path: str = "/ws", rcvbuf: int | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A WebSocket from `local` done by hand (the handshake read, nothing more), for clients that never read."""
    reader, writer = await open_raw(port, rcvbuf=rcvbuf, local=local)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        (
            f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    if not head.startswith(b"HTTP/1.1 101"):
        writer.close()
        raise ConnectionError(f"no WebSocket: {head[:80]!r}")
    return reader, writer
