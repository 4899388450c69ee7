"""Issue 27, attack 9: an idle engine of two frozen with SIGSTOP. Routing by least outstanding visits sent every new
query to it until the liveness probe killed it (~38 s): those requests waited 22-39 s and got 503, and /readyz said
ready throughout. Held when every query gets its answer while the engine is frozen, /readyz says degraded, and the
engine takes queries again after SIGCONT."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections import Counter

import aiohttp

from benchmarks.hostile_attacks.common import PROBE, AttackContext, Outcome

__all__ = ["frozen_engine"]


async def _readyz(session: aiohttp.ClientSession, url: str) -> dict[str, object]:
    async with session.get(url + "/readyz") as answer:
        payload: dict[str, object] = await answer.json()
        return payload


async def frozen_engine(ctx: AttackContext, seconds: float) -> Outcome:
    """SIGSTOP engine 0 (idle), then a small query every 0.25 s for `seconds`; SIGCONT."""
    statuses: Counter[int] = Counter()
    worst = 0.0
    degraded_after: float | None = None
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
        engines = (await _readyz(session, ctx.url))["engines"]
        assert isinstance(engines, list)
        pid = int(engines[0]["pid"])
        os.kill(pid, signal.SIGSTOP)
        began = time.monotonic()

        async def one() -> None:
            nonlocal worst
            sent = time.monotonic()
            async with session.post(ctx.url + "/analysis", data=PROBE) as answer:
                await answer.read()
                statuses[answer.status] += 1
            worst = max(worst, time.monotonic() - sent)

        try:
            tasks = []
            while time.monotonic() - began < seconds:
                tasks.append(asyncio.create_task(one()))
                readyz = await _readyz(session, ctx.url)
                if degraded_after is None and readyz.get("degraded"):
                    degraded_after = time.monotonic() - began
                await asyncio.sleep(0.25)
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        thawed = False
        for _ in range(120):
            readyz = await _readyz(session, ctx.url)
            if not readyz.get("degraded"):
                thawed = True
                break
            await asyncio.sleep(0.25)
    sent = sum(statuses.values())
    outcome = Outcome()
    outcome.checks["every query answered"] = statuses[200] == sent
    outcome.checks["/readyz said degraded"] = degraded_after is not None
    outcome.checks["back after SIGCONT"] = thawed
    seen = "never" if degraded_after is None else f"after {degraded_after:.1f} s"
    outcome.figures.append(
        f"{sent} queries while frozen: {statuses[200]} answered (worst {worst:.2f} s); /readyz degraded {seen}"
    )
    return outcome
