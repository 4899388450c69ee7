"""The connection attacks of the first round (issue 12): slowloris on headers and bodies, idle connections, clients
that never read a stream, header floods, half-close. Connections are spread over attacker addresses, at most
PER_ADDRESS from each (under kgserve's per-address connection cap: these attacks are about timeouts, not caps);
`connection-cap` is the same many connections from one address."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable

from benchmarks.hostile_attacks.common import (
    AttackContext,
    Outcome,
    attacker,
    open_raw,
    peer_gone,
    until_closed,
)

__all__ = [
    "HOG",
    "connection_cap",
    "half_close",
    "header_floods",
    "idle_connections",
    "never_readers",
    "slowloris_bodies",
    "slowloris_headers",
]

PER_ADDRESS = 40
HOG = {
    "id": "hog",
    "moves": [],
    "rules": "chinese",
    "komi": 7.5,
    "boardXSize": 19,
    "boardYSize": 19,
    "maxVisits": 100_000,
    "reportDuringSearchEvery": 0.1,
    "includeOwnership": True,
    "includePolicy": True,
}


def _spread(index: int) -> str:
    return attacker(index // PER_ADDRESS)


async def trickle(port: int, head: bytes, rest: bytes, count: int, seconds: float) -> Outcome:
    """`count` connections send `head`, then a byte of `rest` per second, for `seconds` at most."""

    async def one(index: int) -> bool:
        reader, writer = await open_raw(port, local=_spread(index))
        closed = asyncio.create_task(until_closed(reader))
        try:
            writer.write(head)
            for byte in rest:
                if closed.done():
                    break
                with contextlib.suppress(ConnectionError):
                    writer.write(bytes([byte]))
                await asyncio.wait({closed}, timeout=1.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(closed), 0.5)
            return closed.done()
        finally:
            closed.cancel()
            writer.close()

    rest = rest[: int(seconds)]
    results = await asyncio.gather(*(one(index) for index in range(count)), return_exceptions=True)
    return Outcome(count, sum(1 for r in results if r is True))


async def repeat(one: Callable[[str], Awaitable[bool]], workers: int, seconds: float) -> Outcome:
    """`workers` clients each run `one` again and again for `seconds`: (connections, closed by the server)."""
    end = time.monotonic() + seconds
    opened = closed = 0

    async def worker(index: int) -> None:
        nonlocal opened, closed
        while time.monotonic() < end:
            opened += 1
            with contextlib.suppress(OSError):  # refused or reset before it began: opened, not closed
                was_closed = await one(attacker(index))  # not `closed += await ...`: that reads `closed` first
                closed += was_closed

    await asyncio.gather(*(worker(index) for index in range(workers)))
    return Outcome(opened, closed)


async def slowloris_headers(ctx: AttackContext, seconds: float) -> Outcome:
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
    return await trickle(ctx.port, head, b"X-Slow: " + b"a" * 10_000, 200, seconds)


async def slowloris_bodies(ctx: AttackContext, seconds: float) -> Outcome:
    head = b"POST /analysis HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"
    return await trickle(ctx.port, head, b"{" + b" " * 10_000, 200, seconds)


async def _idle(port: int, seconds: float, addresses: Callable[[int], str]) -> Outcome:
    pairs = []
    for index in range(1000):
        with contextlib.suppress(OSError):
            pairs.append(await open_raw(port, local=addresses(index)))
    waits = [asyncio.create_task(until_closed(reader)) for reader, _ in pairs]
    await asyncio.wait(waits, timeout=seconds)
    closed = sum(1 for task in waits if task.done())
    for task in waits:
        task.cancel()
    for _, writer in pairs:
        writer.close()
    return Outcome(1000, closed + 1000 - len(pairs))


async def idle_connections(ctx: AttackContext, seconds: float) -> Outcome:
    """1,000 connections that never send a byte, from 25 addresses."""
    return await _idle(ctx.port, seconds, _spread)


async def connection_cap(ctx: AttackContext, seconds: float) -> Outcome:
    """1,000 connections that never send a byte, from one address. Since issue 40 they are accepted while the server's
    connection budget has room (its cap engages only in the budget's last share) and closed at the header timeout;
    past the open part they would be answered 429 at once."""
    outcome = await _idle(ctx.port, seconds, lambda index: attacker(0))
    cap = ctx.settings.limits.max_connections_per_client
    outcome.figures.append(f"cap {cap} per address, engaged in the last 1/8 of the connection budget")
    return outcome


async def never_readers(ctx: AttackContext, seconds: float) -> Outcome:
    """10 clients post a streaming 19x19 analysis and never read; a dropped one reconnects, until `seconds`.

    The connection open when the time is up gets `server.send_timeout_s` + 30 s more to be dropped: kgserve may
    wait that timeout for a client that takes nothing (a connection opened just before the end with only 30 s
    to go was counted as not closed, though kgserve dropped it on time)."""
    body = json.dumps(HOG).encode()
    request = b"POST /analysis HTTP/1.1\r\nHost: x\r\nX-Deadline-Ms: 300000\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )
    end = time.monotonic() + seconds
    grace = ctx.settings.server.send_timeout_s + 30
    opened = closed = 0
    lifetimes: list[float] = []

    async def client(index: int) -> None:
        nonlocal opened, closed
        while time.monotonic() < end:
            _, writer = await open_raw(ctx.port, rcvbuf=4096, local=attacker(index))
            opened += 1
            started = time.monotonic()
            writer.write(request)
            give_up = max(end, started) + grace
            while time.monotonic() < give_up:  # never read: only watch the socket's TCP state
                await asyncio.sleep(0.2)
                if peer_gone(writer):
                    closed += 1
                    lifetimes.append(time.monotonic() - started)
                    break
            writer.close()

    await asyncio.gather(*(client(index) for index in range(10)))
    outcome = Outcome(opened, closed)
    if lifetimes:
        lifetimes.sort()
        outcome.figures.append(
            f"dropped after {lifetimes[len(lifetimes) // 2]:.1f} s (median), {lifetimes[-1]:.1f} s at most "
            f"(server.send_timeout_s {ctx.settings.server.send_timeout_s:g})"
        )
    return outcome


async def header_floods(ctx: AttackContext, seconds: float) -> Outcome:
    """10 connections each push up to 32 MB of one header line without ever ending it."""
    chunk = b"a" * 65536

    async def one(local: str) -> bool:
        reader, writer = await open_raw(ctx.port, local=local)
        closed = asyncio.create_task(until_closed(reader))
        try:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Flood: ")
            for _ in range(32 * 16):
                if closed.done():
                    break
                writer.write(chunk)
                with contextlib.suppress(ConnectionError, TimeoutError):
                    await asyncio.wait_for(writer.drain(), 30)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(closed), 30)
            return closed.done()
        finally:
            closed.cancel()
            writer.close()

    return await repeat(one, 10, seconds)


async def half_close(ctx: AttackContext, seconds: float) -> Outcome:
    """10 clients send a long query, then shutdown(SHUT_WR) (kgserve treats it as a disconnect), again and
    again."""
    body = json.dumps({**HOG, "reportDuringSearchEvery": 1.0}).encode()
    request = b"POST /analysis HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)

    async def one(local: str) -> bool:
        reader, writer = await open_raw(ctx.port, local=local)
        writer.write(request)
        await writer.drain()
        writer.write_eof()
        try:
            await asyncio.wait_for(until_closed(reader), 30)
            return True
        except TimeoutError:
            return False
        finally:
            writer.close()

    return await repeat(one, 10, seconds)
