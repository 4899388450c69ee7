"""Hostile clients against a real kgserve: does everyone else still get served, and does kgserve recover?

``python -m benchmarks.hostile [--attack-seconds 15] [--never-read-seconds 60] [--only NAME ...]``

kgserve runs as a subprocess (``python -m kgserve``, sim engine, loopback, runtime/config.yaml's server.*
limits, ``max_inflight_queries`` 16). Each attack runs while a well-behaved client posts a small query every
0.5 s; then the attack's sockets are closed and kgserve must settle. Per attack the script prints whether the
other clients were served (all their requests 200), whether in-flight queries came back to 0, how many of
the attack's connections kgserve itself closed, and kgserve's RSS before and after (held: growth < 20 MB).

Attacks: slowloris on headers (a byte per second, never finishing the head), slowloris on bodies (complete
headers, a body byte per second), 1,000 idle connections that never send a byte, 10 clients that never
read a streamed analysis (reconnecting when dropped), header floods (10 connections each pushing 32 MB of
one unfinished header), and half-close (a long query, then shutdown(SHUT_WR)). Every wait is bounded; the
whole run stays under ``--max-seconds``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp

from benchmarks.common import rss_mb
from kgbench.targets.kgserve_process import KgserveProcess, kgserve_running
from kgbench.targets.sim import cleanup_devices, sim_env, sim_settings
from kgbench.track.machine import machine_line

PROBE = b'{"id":"probe","moves":[],"rules":"chinese","komi":7.5,"boardXSize":9,"boardYSize":9,"maxVisits":5}'
HOG = {
    "id": "hog",
    "moves": [],
    "rules": "chinese",
    "komi": 7.5,
    "boardXSize": 19,
    "boardYSize": 19,
    "maxVisits": 100_000,
    "reportDuringSearchEvery": 0.02,
    "includeOwnership": True,
    "includePolicy": True,
}
MAX_GROWTH_MB = 20.0
INFLIGHT = 16


@dataclass
class AttackResult:
    name: str
    what: str
    probes_ok: int = 0
    probes: int = 0
    probe_worst_s: float = 0.0
    attack_connections: int = 0
    closed_by_server: int = 0
    expect_closed: bool = True
    inflight_zero: bool = False
    settle_s: float = 0.0
    rss_before: float | None = None
    rss_after: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def growth(self) -> float:
        if self.rss_before is None or self.rss_after is None:
            return float("inf")
        return self.rss_after - self.rss_before

    @property
    def held(self) -> bool:
        closed = not self.expect_closed or self.closed_by_server == self.attack_connections
        served = self.probes > 0 and self.probes_ok == self.probes
        return served and closed and self.inflight_zero and self.growth < MAX_GROWTH_MB


# -- helpers -------------------------------------------------------------------------------------------------
async def metric(url: str, name: str) -> float:
    async with aiohttp.ClientSession() as session, session.get(url + "/metrics") as response:
        text = await response.text()
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return float("nan")


async def probe(url: str, stop: asyncio.Event, result: AttackResult) -> None:
    """The well-behaved client: one small query every 0.5 s until `stop`."""
    timeout = aiohttp.ClientTimeout(total=15)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while not stop.is_set():
            started = time.monotonic()
            result.probes += 1
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.post(url + "/analysis", data=PROBE) as response:
                    await response.read()
                    if response.status == 200:
                        result.probes_ok += 1
            result.probe_worst_s = max(result.probe_worst_s, time.monotonic() - started)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)


async def until_closed(reader: asyncio.StreamReader) -> None:
    """Read (and drop) until the server closes the connection."""
    with contextlib.suppress(ConnectionError):
        while await reader.read(65536):
            pass


async def open_raw(port: int, rcvbuf: int | None = None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if rcvbuf is None:
        return await asyncio.open_connection("127.0.0.1", port)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    return await asyncio.open_connection(sock=sock)


# -- attacks: each returns (connections opened, closed by the server) ----------------------------------------
async def trickle(port: int, head: bytes, rest: bytes, count: int, seconds: float) -> tuple[int, int]:
    """`count` connections send `head`, then a byte of `rest` per second, for `seconds` at most."""

    async def one() -> bool:
        reader, writer = await open_raw(port)
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
    results = await asyncio.gather(*(one() for _ in range(count)), return_exceptions=True)
    return count, sum(1 for r in results if r is True)


async def repeat(one: Callable[[], Awaitable[bool]], workers: int, seconds: float) -> tuple[int, int]:
    """`workers` clients each run `one` again and again for `seconds`: (connections, closed by the server)."""
    end = time.monotonic() + seconds
    opened = closed = 0

    async def worker() -> None:
        nonlocal opened, closed
        while time.monotonic() < end:
            opened += 1
            with contextlib.suppress(OSError):  # refused or reset before it began: opened, not closed
                was_closed = await one()  # not `closed += await ...`: that reads `closed` before the await
                closed += was_closed

    await asyncio.gather(*(worker() for _ in range(workers)))
    return opened, closed


async def slowloris_headers(port: int, seconds: float) -> tuple[int, int]:
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
    return await trickle(port, head, b"X-Slow: " + b"a" * 10_000, 200, seconds)


async def slowloris_bodies(port: int, seconds: float) -> tuple[int, int]:
    head = b"POST /analysis HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"
    return await trickle(port, head, b"{" + b" " * 10_000, 200, seconds)


async def idle_connections(port: int, seconds: float) -> tuple[int, int]:
    pairs = [await open_raw(port) for _ in range(1000)]
    waits = [asyncio.create_task(until_closed(reader)) for reader, _ in pairs]
    await asyncio.wait(waits, timeout=seconds)
    closed = sum(1 for task in waits if task.done())
    for task in waits:
        task.cancel()
    for _, writer in pairs:
        writer.close()
    return len(pairs), closed


async def never_readers(port: int, seconds: float) -> tuple[int, int]:
    """10 clients post a streaming 19x19 analysis and never read; a dropped one reconnects, until `seconds`.

    The connection open when the time is up gets 30 s more to be dropped."""
    body = json.dumps(HOG).encode()
    request = b"POST /analysis HTTP/1.1\r\nHost: x\r\nX-Deadline-Ms: 300000\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )
    end = time.monotonic() + seconds
    opened = closed = 0

    async def client() -> None:
        nonlocal opened, closed
        while time.monotonic() < end:
            _, writer = await open_raw(port, rcvbuf=4096)
            opened += 1
            writer.write(request)
            give_up = max(end, time.monotonic()) + 30
            while time.monotonic() < give_up:  # never read: only watch the socket's TCP state
                await asyncio.sleep(0.2)
                if _peer_gone(writer):
                    closed += 1
                    break
            writer.close()

    await asyncio.gather(*(client() for _ in range(10)))
    return opened, closed


def _peer_gone(writer: asyncio.StreamWriter) -> bool:
    """Whether the server has closed or reset the connection, without reading what it sent (TCP_INFO)."""
    sock = writer.get_extra_info("socket")
    if sock is None:
        return True
    try:
        state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]
    except OSError:
        return True
    return bool(state != _TCP_ESTABLISHED)


_TCP_ESTABLISHED = 1


async def header_floods(port: int, seconds: float) -> tuple[int, int]:
    """10 connections each push up to 32 MB of one header line without ever ending it."""
    chunk = b"a" * 65536

    async def one() -> bool:
        reader, writer = await open_raw(port)
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


async def half_close(port: int, seconds: float) -> tuple[int, int]:
    """10 clients send a long query, then shutdown(SHUT_WR) (kgserve treats it as a disconnect), again and
    again; 10 stay below max_inflight_queries, so the well-behaved client is never refused for capacity."""
    body = json.dumps({**HOG, "reportDuringSearchEvery": 1.0}).encode()
    request = b"POST /analysis HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)

    async def one() -> bool:
        reader, writer = await open_raw(port)
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


Attack = Callable[[int, float], Awaitable[tuple[int, int]]]


@dataclass(frozen=True)
class Plan:
    name: str
    what: str
    run: Attack
    seconds: Callable[[argparse.Namespace, dict[str, float]], float]
    expect_closed: bool = True


PLANS = [
    Plan(
        "slowloris-headers",
        "200 conns, a header byte/s",
        slowloris_headers,
        lambda a, s: s["header_timeout_s"] + 5,
    ),
    Plan("slowloris-bodies", "200 conns, a body byte/s", slowloris_bodies, lambda a, s: s["body_timeout_s"] + 5),
    Plan("idle", "1,000 conns, never a byte", idle_connections, lambda a, s: s["header_timeout_s"] + 5),
    Plan("never-read", "10 clients never read a stream", never_readers, lambda a, s: a.never_read_seconds),
    Plan("header-flood", "10 clients: 32 MB unfinished header, again", header_floods, lambda a, s: a.attack_seconds),
    Plan("half-close", "10 clients: long query, SHUT_WR, again", half_close, lambda a, s: a.attack_seconds),
]


async def run_attack(
    proc: KgserveProcess, plan: Plan, args: argparse.Namespace, limits: dict[str, float]
) -> AttackResult:
    assert proc.url is not None and proc.proc is not None
    url = proc.url
    port = int(url.rsplit(":", 1)[1])
    seconds = plan.seconds(args, limits)
    result = AttackResult(plan.name, plan.what, expect_closed=plan.expect_closed)
    result.rss_before = rss_mb(proc.proc.pid)
    stop = asyncio.Event()
    prober = asyncio.create_task(probe(url, stop, result))
    try:
        result.attack_connections, result.closed_by_server = await asyncio.wait_for(
            plan.run(port, seconds), seconds + 60
        )
    except TimeoutError:
        result.notes.append("attack did not finish in time")
    finally:
        stop.set()
        await prober
    settle = time.monotonic()
    while time.monotonic() - settle < 30:
        if (
            await metric(url, "kgserve_inflight_queries") == 0
            and await metric(url, "kgserve_engine_outstanding_visits") == 0
        ):
            result.inflight_zero = True
            break
        await asyncio.sleep(0.2)
    result.settle_s = time.monotonic() - settle
    await asyncio.sleep(1.0)  # let closed connections be collected before reading RSS
    result.rss_after = rss_mb(proc.proc.pid)
    return result


async def hostile(args: argparse.Namespace) -> list[AttackResult]:
    settings = sim_settings(1)
    server = settings.server
    limits = {"header_timeout_s": server.header_timeout_s, "body_timeout_s": server.body_timeout_s}
    env = sim_env(None, device=f"hostile{os.getpid()}", KGSERVE_SIM_SPEED="1")
    results: list[AttackResult] = []
    deadline = time.monotonic() + args.max_seconds
    with kgserve_running(settings, env, max_inflight=INFLIGHT) as proc:
        # warm up: a few requests so the first attack's RSS baseline is not the cold start
        assert proc.url is not None
        async with aiohttp.ClientSession() as session:
            for _ in range(20):
                async with session.post(proc.url + "/analysis", data=PROBE) as response:
                    await response.read()
        for plan in PLANS:
            if args.only and plan.name not in args.only:
                continue
            if time.monotonic() + plan.seconds(args, limits) + 40 > deadline:
                results.append(AttackResult(plan.name, plan.what, notes=["not run: --max-seconds"]))
                continue
            results.append(await run_attack(proc, plan, args, limits))
            print(render_row(results[-1]), file=sys.stderr, flush=True)
    return results


def render_row(r: AttackResult) -> str:
    if r.probes == 0:
        return f"| {r.name} | {r.what} | - | - | - | - | - | not run ({'; '.join(r.notes)}) |"
    closed = f"{r.closed_by_server}/{r.attack_connections}" if r.expect_closed else "n/a"
    before = "-" if r.rss_before is None else f"{r.rss_before:.0f}"
    after = "-" if r.rss_after is None else f"{r.rss_after:.0f}"
    notes = f" ({'; '.join(r.notes)})" if r.notes else ""
    return (
        f"| {r.name} | {r.what} | {r.probes_ok}/{r.probes} (worst {r.probe_worst_s:.2f} s) | "
        f"{'yes' if r.inflight_zero else 'NO'} ({r.settle_s:.1f} s) | {closed} | {before} → {after} MB "
        f"({r.growth:+.1f}) | {'held' if r.held else 'BROKE'}{notes} |"
    )


def render(results: list[AttackResult]) -> str:
    head = (
        "| attack | what | other clients served | in-flight back to 0 (settle) | conns closed by kgserve | "
        "kgserve RSS before → after | verdict |\n|---|---|---|---|---|---|---|\n"
    )
    return f"### Hostile clients\n\n{machine_line()}\n\n" + head + "\n".join(render_row(r) for r in results) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.hostile", description=__doc__.split("\n")[0])
    p.add_argument("--attack-seconds", type=float, default=15.0, help="header-flood and half-close length")
    p.add_argument("--never-read-seconds", type=float, default=60.0)
    p.add_argument("--only", nargs="*", choices=[plan.name for plan in PLANS], help="run only these attacks")
    p.add_argument("--max-seconds", type=float, default=600.0, help="skip attacks that would not fit")
    return p.parse_args(argv)


def _raise_fd_limit(wanted: int = 8192) -> None:
    """1,000 idle connections need 1,000 descriptors here and in kgserve (which inherits the limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _raise_fd_limit()
    try:
        results = asyncio.run(hostile(args))
    finally:
        cleanup_devices()
    print(render(results))
    ran = [r for r in results if r.probes]
    return 0 if ran and all(r.held for r in ran) else 1


if __name__ == "__main__":
    sys.exit(main())
