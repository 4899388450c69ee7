"""Issue 27, attack 1: many concurrent ~1 MB queries, to take kgserve's memory (the first round's limits counted
queries and bodies, not bytes: 1,000 of them took it to 2.6 GB). kgserve's RSS is sampled throughout; held when
its peak stays under the ceiling the defaults imply (docs/http-limits.md) and it comes back after."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter

import aiohttp
import psutil

from benchmarks.hostile_attacks.common import AttackContext, Outcome, attacker, session_from

__all__ = ["MEMORY_CEILING_MB", "RssSampler", "big_queries"]

MEMORY_CEILING_MB = 1024.0  # issue 27: "keep the defaults under ~1 GiB whatever one client sends"


class RssSampler:
    """kgserve's RSS every 0.1 s while the attack runs: its peak."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.peak_mb = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(psutil.Error):
                self.peak_mb = max(self.peak_mb, self.process.memory_info().rss / 2**20)
            await asyncio.sleep(0.1)

    def __enter__(self) -> RssSampler:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()


def big_query(index: int, size: int) -> bytes:
    body = {
        "id": f"big{index}",
        "moves": [],
        "rules": "chinese",
        "komi": 7.5,
        "boardXSize": 19,
        "boardYSize": 19,
        "maxVisits": 2000,
        "pad": "x" * size,  # KataGo warns about the field and analyses the query
    }
    return json.dumps(body).encode()


async def big_queries(ctx: AttackContext, seconds: float) -> Outcome:
    """`--memory-queries` concurrent requests of one `--memory-query-bytes` query each, from `--memory-clients`
    addresses, each with a deadline of `seconds`."""
    count, size, clients = ctx.args.memory_queries, ctx.args.memory_query_bytes, ctx.args.memory_clients
    statuses: Counter[str] = Counter()
    timeout = aiohttp.ClientTimeout(total=seconds + 60)
    sessions = [session_from(attacker(index), timeout=timeout) for index in range(clients)]
    headers = {"X-Deadline-Ms": str(int(seconds * 1000))}

    body = big_query(0, size)  # one body for all: the attacker's own CPU goes to sending, not encoding

    async def one(index: int) -> None:
        session = sessions[index % clients]
        try:
            async with session.post(ctx.url + "/analysis", data=body, headers=headers) as answer:
                await answer.read()
                statuses[str(answer.status)] += 1
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            statuses[type(exc).__name__] += 1

    try:
        with RssSampler(ctx.pid) as rss:
            await asyncio.gather(*(one(index) for index in range(count)))
    finally:
        for session in sessions:
            await session.close()
    limits = ctx.settings.limits
    outcome = Outcome(peak_rss_mb=rss.peak_mb)
    outcome.checks["peak RSS under 1 GiB"] = rss.peak_mb < MEMORY_CEILING_MB
    outcome.checks["some analysed"] = statuses["200"] > 0
    answered = ", ".join(f"{key}: {value}" for key, value in sorted(statuses.items()))
    outcome.figures.append(
        f"{count} x {size / 1e6:.1f} MB from {clients} address(es): {answered}; peak RSS {rss.peak_mb:.0f} MB "
        f"(budget {limits.memory_budget_bytes >> 20} MiB, {limits.memory_per_client_bytes >> 20} MiB a client)"
    )
    return outcome
