"""Issue 27's attacks on fairness between clients: one client taking every slot (5), an uncredentialed
interactive flood (6), a float in `priorities` (7), partial-result floods (8)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from typing import Any

import aiohttp
from websockets.asyncio.client import connect

from benchmarks.hostile_attacks.common import PROBE, AttackContext, Outcome, attacker, metric, session_from
from benchmarks.hostile_attacks.ws_attacks import ws_query
from kgserve.admission.limits import INFLIGHT_RESERVE_DIVISOR

__all__ = [
    "PROBE_INFLIGHT",
    "float_priorities",
    "interactive_flood",
    "open_part",
    "partial_flood",
    "slot_hog",
    "within_share",
]

SMALL = {"moves": [["B", "C3"]], "rules": "chinese", "komi": 7.5, "boardXSize": 9, "boardYSize": 9}
# the well-behaved client (benchmarks.hostile.probe) has one query in flight at most, and kgserve_inflight_queries
# counts it beside the attacker's: the server-wide peak may pass the attacker's cap by that one
PROBE_INFLIGHT = 1


def within_share(peak_inflight: float, cap: int) -> bool:
    """Whether kgserve's peak of queries in flight, read while one attacker and the probe ran, shows the attacker
    held to `cap` (since issue 40: the part of limits.max_inflight_queries open to one client, `open_part`)."""
    return peak_inflight <= cap + PROBE_INFLIGHT


def open_part(max_inflight: int) -> int:
    """What one client may have in flight while no other client has any (kgserve.admission.limits, issue 40): the
    server-wide bound less the share kept for newcomers. Its per-client cap engages while the probe has a query in
    flight: the probe being served is what shows it."""
    return max_inflight - max_inflight // INFLIGHT_RESERVE_DIVISOR


async def slot_hog(ctx: AttackContext, seconds: float) -> Outcome:
    """`--slot-connections` WebSockets from one address, each keeping `--slot-queries` queries in flight (a new one
    for each that finishes), for `seconds`."""
    connections, per = ctx.args.slot_connections, ctx.args.slot_queries
    refusals: Counter[str] = Counter()
    finished = 0
    ws_url = ctx.url.replace("http://", "ws://") + ctx.settings.websocket.path

    async def one(index: int) -> None:
        nonlocal finished
        try:
            async with connect(ws_url, max_size=None, local_addr=(attacker(4), 0), open_timeout=30) as ws:
                sent = 0
                for _ in range(per):
                    await ws.send(json.dumps(ws_query(f"h{index}.{sent}", ctx.args.slot_visits)))
                    sent += 1
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    with contextlib.suppress(TimeoutError):
                        line = json.loads(await asyncio.wait_for(ws.recv(), 0.5))
                        if "error" in line:
                            refusals[_cap_named(line["error"])] += 1
                        elif line.get("isDuringSearch") is False:
                            finished += 1
                        else:
                            continue
                        await ws.send(json.dumps(ws_query(f"h{index}.{sent}", ctx.args.slot_visits)))
                        sent += 1
                await ws.send(json.dumps({"id": "all", "action": "terminate_all"}))
        except Exception as exc:  # refused at the handshake (connection cap) or closed
            refusals[f"connection: {type(exc).__name__}"] += 1

    with contextlib.suppress(Exception):
        inflight = await _peak_inflight(ctx, one, connections)
    outcome = Outcome()
    cap = ctx.settings.limits.max_inflight_per_client
    bound = open_part(ctx.settings.limits.max_inflight_queries)
    outcome.checks["newcomers' share kept"] = within_share(inflight, bound)
    named = ", ".join(f"{key}: {count}" for key, count in sorted(refusals.items()))
    outcome.figures.append(
        f"{connections} x {per} queries of {ctx.args.slot_visits} visits kept in flight from one address: at most "
        f"{inflight:.0f} in flight (open to one client {bound}; its cap {cap} while the probe has one in flight), "
        f"{finished} finished; refused: {named}"
    )
    return outcome


async def _peak_inflight(ctx: AttackContext, one: Any, connections: int) -> float:
    """Run the attack's connections; kgserve's queries in flight at their peak (from /metrics)."""
    peak = 0.0
    tasks = [asyncio.create_task(one(index)) for index in range(connections)]
    while not all(task.done() for task in tasks):
        peak = max(peak, await metric(ctx.url, "kgserve_inflight_queries"))
        await asyncio.sleep(0.5)
    await asyncio.gather(*tasks, return_exceptions=True)
    return peak


def _cap_named(error: str) -> str:
    for key in ("max_inflight_per_client", "max_inflight_per_connection", "max_inflight_queries", "memory"):
        if key in error:
            return key
    return error[:40]


async def _closed_loop(
    session: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str], stop: Any
) -> int:
    """Post `body` again and again until `stop` is set: the number of answers."""
    answers = 0
    while not stop.is_set():
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            async with session.post(url + "/analysis", data=body, headers=headers) as answer:
                await answer.read()
                answers += 1
    return answers


async def _victim(url: str, body: bytes, headers: dict[str, str] | None = None) -> float:
    began = time.monotonic()
    async with aiohttp.ClientSession() as session, session.post(url + "/analysis", data=body, headers=headers) as r:
        await r.read()
    return time.monotonic() - began


async def _behind(ctx: AttackContext, klass: str | None, flood: int, headers: dict[str, str] | None = None) -> float:
    """A batch query's latency from 127.0.0.1 behind `flood` closed-loop queries of `klass` (None: no flood)."""
    query = json.dumps({"id": "victim", **SMALL, "maxVisits": ctx.args.flood_visits}).encode()
    if klass is None:
        return await _victim(ctx.url, query)
    stop = asyncio.Event()
    body = json.dumps({"id": "flood", **SMALL, "maxVisits": ctx.args.flood_visits}).encode()
    async with session_from(attacker(5)) as session:
        sent = {"x-priority-class": klass, **(headers or {})}
        loops = [asyncio.create_task(_closed_loop(session, ctx.url, body, sent, stop)) for _ in range(flood)]
        await asyncio.sleep(2.0)  # the engine's queue is full of the flood
        try:
            return await _victim(ctx.url, query)
        finally:
            stop.set()
            await asyncio.gather(*loops, return_exceptions=True)


async def interactive_flood(ctx: AttackContext, seconds: float) -> Outcome:
    """A batch query behind nothing, behind a batch flood, behind an uncredentialed interactive flood."""
    flood = ctx.args.flood_queries
    alone = await _victim(ctx.url, json.dumps({"id": "v", **SMALL, "maxVisits": ctx.args.flood_visits}).encode())
    batch = await _behind(ctx, "batch", flood)
    interactive = await _behind(ctx, "interactive", flood)
    demoted = await _demoted(ctx, flood)
    share = ctx.settings.priority.interactive_share
    outcome = Outcome()
    outcome.checks["past the share: batch"] = demoted == max(0, flood - share)
    outcome.figures.append(
        f"a batch query: alone {alone:.2f} s, behind {flood} batch {batch:.2f} s, behind {flood} interactive "
        f"{interactive:.2f} s ({demoted} of them ran as batch: share {share})"
    )
    return outcome


async def _demoted(ctx: AttackContext, count: int) -> int:
    """X-Priority-Demoted of one request of `count` interactive queries from one attacker."""
    lines = "\n".join(json.dumps({"id": f"i{index}", **SMALL, "maxVisits": 5}) for index in range(count))
    async with (
        session_from(attacker(6)) as session,
        session.post(ctx.url + "/analysis", data=lines, headers={"x-priority-class": "interactive"}) as answer,
    ):
        await answer.read()
        return int(answer.headers.get("x-priority-demoted", "0"))


async def float_priorities(ctx: AttackContext, seconds: float) -> Outcome:
    """A credentialed client keeps the engine's queue full of interactive queries (`--flood-queries` in flight, more
    than the engine's analysis threads) for `seconds`; a batch query
    with `priorities: [4.0e18]` (KataGo reads 4000000000000000000) must not overtake them."""
    token = ctx.env.get("KGSERVE_HOSTILE_INTERACTIVE", "")
    body = json.dumps({"id": "i", **SMALL, "maxVisits": ctx.args.flood_visits}).encode()
    headers = {"x-priority-class": "interactive", "authorization": f"Bearer {token}"}
    sneaky = {"id": "f", **SMALL, "maxVisits": ctx.args.flood_visits, "analyzeTurns": [1], "priorities": [4.0e18]}
    stop = asyncio.Event()
    async with session_from(attacker(7)) as session:
        flood = ctx.args.flood_queries
        loops = [asyncio.create_task(_closed_loop(session, ctx.url, body, headers, stop)) for _ in range(flood)]
        await asyncio.sleep(1.0)
        sneak = asyncio.create_task(_victim(ctx.url, json.dumps(sneaky).encode(), {"x-priority-class": "batch"}))
        await asyncio.sleep(seconds)
        overtook = sneak.done()
        stop.set()
        await asyncio.gather(*loops, return_exceptions=True)
        latency = await sneak
    outcome = Outcome()
    outcome.checks["it waited for the interactive work"] = not overtook
    outcome.figures.append(
        f"batch priorities [4.0e18] behind {flood} interactive in flight for {seconds:g} s: "
        f"{'overtook them' if overtook else 'waited'} ({latency:.2f} s)"
    )
    return outcome


async def partial_flood(ctx: AttackContext, seconds: float) -> Outcome:
    """64 queries asking for partial results every 0.001 s (refused), then 64 at the floor for `seconds`, all
    with ownership and policy, while a short query from 127.0.0.1 is timed."""
    floor = ctx.settings.limits.min_report_interval_s
    alone = await _victim(ctx.url, PROBE)
    ws_url = ctx.url.replace("http://", "ws://") + ctx.settings.websocket.path
    extra = {"includeOwnership": True, "includePolicy": True}
    refused = 0
    received = 0
    async with connect(ws_url, max_size=None, local_addr=(attacker(8), 0), open_timeout=30) as ws:
        for index in range(64):
            await ws.send(json.dumps(ws_query(f"f{index}", 100_000, reportDuringSearchEvery=0.001, **extra)))
        for _ in range(64):
            line = json.loads(await asyncio.wait_for(ws.recv(), 30))
            refused += line.get("field") == "reportDuringSearchEvery"
        for index in range(64):
            await ws.send(json.dumps(ws_query(f"g{index}", 100_000, reportDuringSearchEvery=floor, **extra)))
        began = time.monotonic()
        worst = 0.0
        while time.monotonic() - began < seconds:
            with contextlib.suppress(TimeoutError):
                received += len(await asyncio.wait_for(ws.recv(), 0.2))
            if time.monotonic() - began > 2 and worst == 0.0:
                worst = await _victim(ctx.url, PROBE)
        rate = received / (time.monotonic() - began)
        await ws.send(json.dumps({"id": "all", "action": "terminate_all"}))
    cap = ctx.settings.limits.max_partial_bytes_per_s
    outcome = Outcome()
    outcome.checks["0.001 s refused with KataGo's error"] = refused == 64
    outcome.figures.append(
        f"64 at 0.001 s: {refused} refused; 64 at {floor:g} s: the attacker got {rate / 1e6:.1f} MB/s "
        f"(cap {cap / 2**20:.0f} MiB/s); a short query alone {alone:.2f} s, during {worst:.2f} s"
    )
    return outcome
