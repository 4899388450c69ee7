"""Issue 27's WebSocket attacks: pings from a client that never reads (2), terminates with huge `turnNumbers` (3),
a cut-off client that keeps its socket (4), and SIGTERM with queries in flight (10)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import aiohttp
import psutil
from websockets.asyncio.client import ClientConnection, connect

from benchmarks.hostile_attacks.common import (
    AttackContext,
    Outcome,
    attacker,
    peer_gone,
    raw_websocket,
    ws_frame,
)
from benchmarks.hostile_attacks.memory import RssSampler
from kgserve.engine.errors import SHUTDOWN_TEXT

__all__ = [
    "SHUTDOWN_TEXT",
    "cut_off_socket",
    "drain_answers",
    "drain_on_sigterm",
    "ping_flood",
    "terminate_flood",
    "ws_query",
]


def ws_query(caller_id: str, visits: int, **extra: Any) -> dict[str, Any]:
    position = {"moves": [["B", "Q4"], ["W", "D4"]], "rules": "chinese", "komi": 7.5}
    return {"id": caller_id, **position, "boardXSize": 19, "boardYSize": 19, "maxVisits": visits, **extra}


async def _wait_gone(writer: asyncio.StreamWriter, seconds: float) -> float | None:
    """Seconds until kgserve closed or reset the connection (None: still open after `seconds`)."""
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        if peer_gone(writer):
            return time.monotonic() - began
        await asyncio.sleep(0.1)
    return None


async def ping_flood(ctx: AttackContext, seconds: float) -> Outcome:
    """One WebSocket sends pings for `seconds` and never reads (uvicorn wrote a pong for each, unread)."""
    _, writer = await raw_websocket(ctx.port, attacker(0), rcvbuf=4096)
    burst = ws_frame(0x9, b"p" * 125) * 512
    sent = 0
    began = time.monotonic()
    with RssSampler(ctx.pid) as rss:
        while time.monotonic() - began < seconds and not peer_gone(writer):
            writer.write(burst)
            sent += 512
            try:
                await asyncio.wait_for(writer.drain(), 1.0)
            except TimeoutError:  # kgserve reads nothing more from us: wait, do not pile it up here
                await asyncio.sleep(0.5)
            except ConnectionError:
                break
        bound = ctx.settings.server.send_timeout_s + 15
        gone_after = await _wait_gone(writer, bound)
    writer.close()
    outcome = Outcome(1, int(gone_after is not None), peak_rss_mb=rss.peak_mb)
    closed = "still open" if gone_after is None else f"reset {time.monotonic() - began:.0f} s after the first ping"
    outcome.figures.append(f"{sent:,} pings sent ({sent * 131 / 1e6:.0f} MB); {closed}; peak RSS {rss.peak_mb:.0f} MB")
    return outcome


async def _healthz_worst(url: str, stop: asyncio.Event) -> float:
    worst = 0.0
    async with aiohttp.ClientSession() as session:
        while not stop.is_set():
            began = time.monotonic()
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(url + "/healthz", timeout=aiohttp.ClientTimeout(total=30)) as answer:
                    await answer.read()
            worst = max(worst, time.monotonic() - began)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.1)
    return worst


def _ws_url(ctx: AttackContext) -> str:
    return ctx.url.replace("http://", "ws://") + ctx.settings.websocket.path


async def terminate_flood(ctx: AttackContext, seconds: float) -> Outcome:
    """Queries sharing one id, then terminates naming them with `--turn-numbers` entries each, for `seconds`."""
    entries = ctx.args.turn_numbers
    queries = min(ctx.settings.websocket.max_inflight_per_connection, ctx.settings.limits.max_inflight_per_client)
    stop = asyncio.Event()
    prober = asyncio.create_task(_healthz_worst(ctx.url, stop))
    refused = acked = messages = 0
    async with connect(_ws_url(ctx), max_size=None, local_addr=(attacker(1), 0), open_timeout=30) as ws:
        for index in range(queries):
            await ws.send(json.dumps(ws_query("q", 10_000_000, reportDuringSearchEvery=5.0, n=index)))
        counted = {"refused": 0, "acked": 0}
        reader = asyncio.create_task(_count(ws, counted))
        message = json.dumps({"id": "t", "action": "terminate", "terminateId": "q", "turnNumbers": [2] * entries})
        began = time.monotonic()
        with RssSampler(ctx.pid) as rss:
            while time.monotonic() - began < seconds:
                await ws.send(message)
                messages += 1
                await asyncio.sleep(0.05)
            await ws.send(json.dumps({"id": "all", "action": "terminate_all"}))
            for _ in range(600):  # kgserve answers every terminate in turn (big ones parse off the event loop)
                if counted["refused"] + counted["acked"] >= messages:
                    break
                await asyncio.sleep(0.1)
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        refused, acked = counted["refused"], counted["acked"]
    stop.set()
    worst = await prober
    cap = ctx.settings.limits.max_turns_per_query
    outcome = Outcome(peak_rss_mb=rss.peak_mb)
    outcome.checks["every terminate answered"] = refused + acked == messages
    outcome.checks["over the cap refused" if entries > cap else "acknowledged"] = (
        refused == messages if entries > cap else acked == messages
    )
    outcome.figures.append(
        f"{queries} queries, {messages} terminates of {entries:,} turns ({len(message) / 1e3:.0f} KB each): "
        f"{refused} refused, {acked} acknowledged; /healthz worst {worst:.2f} s; peak RSS {rss.peak_mb:.0f} MB"
    )
    return outcome


async def _count(ws: ClientConnection, counts: dict[str, int]) -> None:
    async for raw in ws:
        line = json.loads(raw)
        if line.get("field") == "turnNumbers":
            counts["refused"] += 1
        elif line.get("action") == "terminate":
            counts["acked"] += 1


async def cut_off_socket(ctx: AttackContext, seconds: float) -> Outcome:
    """A WebSocket asks for a stream of partial results and never reads: kgserve must close it and free its
    socket (it stayed ESTABLISHED with megabytes of send queue for as long as the client lived)."""
    fds_before = psutil.Process(ctx.pid).num_fds()
    _, writer = await raw_websocket(ctx.port, attacker(2), rcvbuf=4096)
    for index in range(4):
        query = ws_query(f"c{index}", 100_000, reportDuringSearchEvery=0.1, includeOwnership=True)
        writer.write(ws_frame(0x1, json.dumps({**query, "includePolicy": True}).encode()))
    began = time.monotonic()
    gone_after = await _wait_gone(writer, max(seconds, ctx.settings.server.send_timeout_s + 30))
    await asyncio.sleep(1.0)
    fds_after = psutil.Process(ctx.pid).num_fds()
    writer.close()
    outcome = Outcome(1, int(gone_after is not None))
    outcome.checks["its descriptor freed"] = fds_after <= fds_before
    closed = "still open" if gone_after is None else f"closed {time.monotonic() - began - 1:.1f} s in"
    outcome.figures.append(f"{closed}; kgserve's fds {fds_before} -> {fds_after}")
    return outcome


def drain_answers(lines: list[dict[str, Any]]) -> tuple[set[str], set[str], set[str]]:
    """The ids that got a final answer, the shutdown's error line, or another error line (refused when sent, e.g.
    past websocket.max_inflight_per_connection: told at once, before the SIGTERM)."""
    finals = {line["id"] for line in lines if line.get("isDuringSearch") is False and "id" in line}
    cut = {line["id"] for line in lines if line.get("error") == SHUTDOWN_TEXT and "id" in line}
    refused = {line["id"] for line in lines if "error" in line and "id" in line} - cut
    return finals, cut, refused


async def drain_on_sigterm(url: str, stop: Any, queries: int, grace_s: float) -> Outcome:
    """`queries` queries in flight on one WebSocket (half short, half long), then SIGTERM (`stop()`): each must
    get its answer or an error line, then the connection close 1001, within the grace period."""
    ws_url = url.replace("http://", "ws://") + "/ws"
    lines: list[dict[str, Any]] = []
    async with connect(ws_url, max_size=None, local_addr=(attacker(3), 0), open_timeout=30) as ws:
        for index in range(queries):
            visits = 200 if index % 2 else 10_000_000  # the long ones outlast any grace period
            await ws.send(json.dumps(ws_query(f"d{index}", visits)))
        await asyncio.sleep(1.0)
        began = time.monotonic()
        stopping = asyncio.get_running_loop().run_in_executor(None, stop)
        code = None
        try:
            async for raw in ws:
                lines.append(json.loads(raw))
        except Exception:
            pass
        code = ws.close_code
        closed_after = time.monotonic() - began
        await stopping
    finals, cut, refused = drain_answers(lines)
    ids = {f"d{index}" for index in range(queries)}
    outcome = Outcome()
    outcome.checks["every query answered or told"] = ids <= finals | cut | refused
    outcome.checks["closed with 1001"] = code == 1001
    outcome.checks["within the grace period"] = closed_after < grace_s + 2
    outcome.figures.append(
        f"{queries} queries: {len(finals & ids)} answered, {len(cut & ids)} cut by the shutdown, "
        f"{len(refused & ids)} refused at admission; close {code} "
        f"{closed_after:.1f} s after SIGTERM (grace {grace_s:g} s)"
    )
    return outcome
