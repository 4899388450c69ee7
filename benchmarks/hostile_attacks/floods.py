"""Issue 36's message flood: one client (one attacker address) floods WebSockets with small invalid lines, reading
every answer (so no send-buffer guard trips), at `--message-rate` messages a second in all, from `--message-processes`
processes of `--message-connections` connections each (benchmarks.hostile_attacks.flooder: one Python process
writes ~60,000 a second only if kgserve takes them); meanwhile another client's 9x9 query (127.0.0.1, over HTTP)
and /healthz are timed, as they were before the flood (alone).

Held when the victim's median and mean during the flood are at most twice alone's, /healthz stays under 100 ms,
and the flooder was told (an error line other than the invalid line's: kgserve's notice that it is paced; over
HTTP, nothing but X-Paced-Ms says so, and the check is on the flooder's error texts alone).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import sys
import time

import aiohttp
import psutil

from benchmarks.hostile_attacks.common import PROBE, AttackContext, Outcome, attacker

__all__ = ["HEALTHZ_LIMIT_S", "VICTIM_FACTOR", "flood_verdict", "message_flood", "request_flood"]

VICTIM_FACTOR = 2.0  # the victim's median during the flood, against alone
HEALTHZ_LIMIT_S = 0.1
RAMP_S = 1.5  # the flood's first seconds are not timed: its processes are starting


async def _timed(session: aiohttp.ClientSession, method: str, url: str, body: bytes | None = None) -> float:
    began = time.monotonic()
    try:
        async with session.request(method, url, data=body) as answer:
            await answer.read()
            ok = answer.status == 200
    except (aiohttp.ClientError, TimeoutError):
        ok = False
    took = time.monotonic() - began
    return took if ok else float("inf")


async def _loop(url: str, method: str, body: bytes | None, end: float) -> list[float]:
    """One request after the other (0.1 s apart) until `end`: their times (inf: not answered 200)."""
    times: list[float] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        while time.monotonic() < end:
            times.append(await _timed(session, method, url, body))
            await asyncio.sleep(0.1)
    return times


async def _victims(url: str, seconds: float) -> tuple[list[float], list[float]]:
    """The victim's 9x9 query and /healthz, each in a loop of its own for `seconds`: their times."""
    end = time.monotonic() + seconds
    queries = asyncio.create_task(_loop(url + "/analysis", "POST", PROBE, end))
    health = await _loop(url + "/healthz", "GET", None, end)
    return await queries, health


async def _flooders(ctx: AttackContext, seconds: float, http: bool) -> list[asyncio.subprocess.Process]:
    processes, connections, rate = _sizes(ctx, http)
    argv = ["--port", str(ctx.port), "--local", attacker(9), "--connections", str(connections)]
    argv += ["--rate", str(rate / processes), "--seconds", str(seconds)] + (["--http"] if http else [])
    return [
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "benchmarks.hostile_attacks.flooder", *argv, stdout=asyncio.subprocess.PIPE
        )
        for _ in range(processes)
    ]


def _sizes(ctx: AttackContext, http: bool) -> tuple[int, int, float]:
    """Flooding processes, connections of each, messages (requests) a second in all."""
    if http:
        return ctx.args.message_processes, ctx.args.request_connections, ctx.args.request_rate
    return ctx.args.message_processes, ctx.args.message_connections, ctx.args.message_rate


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def flood_verdict(alone: list[float], during: list[float], health: list[float]) -> dict[str, bool]:
    """The attack's checks from the victim's times alone and during the flood and /healthz's during it: the
    victim's median and mean (a stall of seconds counts in the mean, not in the median) at most VICTIM_FACTOR
    times alone's, and every /healthz under HEALTHZ_LIMIT_S."""
    within = bool(during) and all(
        measure(during) <= VICTIM_FACTOR * measure(alone) for measure in (statistics.median, statistics.fmean)
    )
    return {
        f"victim within {VICTIM_FACTOR:g}x alone": within,
        f"/healthz under {HEALTHZ_LIMIT_S * 1000:.0f} ms": bool(health) and max(health) < HEALTHZ_LIMIT_S,
    }


async def message_flood(ctx: AttackContext, seconds: float) -> Outcome:
    """One client's WebSockets send small invalid lines at `--message-rate` in all, reading every answer."""
    return await _flood(ctx, seconds, http=False)


async def request_flood(ctx: AttackContext, seconds: float) -> Outcome:
    """One client's keep-alive connections pipeline requests of a small invalid line at `--request-rate` in all."""
    return await _flood(ctx, seconds, http=True)


async def _flood(ctx: AttackContext, seconds: float, *, http: bool) -> Outcome:
    alone, health_alone = await _victims(ctx.url, min(5.0, seconds / 2))
    cpu = psutil.Process(ctx.pid)
    cpu_before = sum(cpu.cpu_times()[:2])
    flooders = await _flooders(ctx, seconds, http)
    await asyncio.sleep(RAMP_S)
    during, health = await _victims(ctx.url, seconds - RAMP_S - 0.5)
    results = []
    for process in flooders:
        out, _ = await process.communicate()
        with contextlib.suppress(ValueError):
            results.append(json.loads(out.decode().strip().splitlines()[-1]))
    cpu_s = sum(cpu.cpu_times()[:2]) - cpu_before
    answers = sum(int(r["answers"]) for r in results)
    written = sum(int(r["written"]) for r in results)
    texts: dict[str, int] = {}
    for r in results:
        for text, count in r["texts"].items():
            texts[text] = texts.get(text, 0) + count
    outcome = Outcome(checks=flood_verdict(alone, during, health))
    outcome.checks["the flooder told"] = bool(texts)
    processes, connections, rate = _sizes(ctx, http)
    told = "; ".join(f"{count} x {text!r}" for text, count in texts.items()) or "no other error line"
    written_s, answered_s = written / seconds, answers / seconds
    kind = "keep-alive connection(s), pipelined" if http else "WebSocket(s)"
    flood = f"asked {rate:,.0f}/s from {processes} process(es) x {connections} {kind}: "
    flood += f"written {written_s:,.0f}/s, answered {answered_s:,.0f}/s"
    cpu_line = f"kgserve's CPU {cpu_s / seconds:.0%} of a core ({cpu_s / max(answers, 1) * 1e6:.0f} us an answer)"
    victim = (
        f"the victim's 9x9 query alone median {_ms(statistics.median(alone))} (mean {_ms(statistics.fmean(alone))}, "
        f"worst {_ms(max(alone))}, n={len(alone)}), during median {_ms(statistics.median(during))} (mean "
        f"{_ms(statistics.fmean(during))}, worst {_ms(max(during))}, n={len(during)})"
    )
    health_line = (
        f"/healthz alone worst {_ms(max(health_alone))}, during median {_ms(statistics.median(health))}, "
        f"worst {_ms(max(health))}"
    )
    outcome.figures.append(f"{flood}; {cpu_line}; {victim}; {health_line}; the flooder saw: {told}")
    return outcome
