"""The closed-loop client of benchmarks.hotpath: aiohttp, pre-encoded bodies, as little work as it can.

Every request body is encoded before the round starts; a worker posts the next one as soon as its previous
answer is read in full. The round records each answer's latency and status, and the client process's own
CPU time, so the table can show the client's headroom next to the server's figures.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
import psutil

__all__ = ["RoundResult", "closed_loop"]

WARMUP_S = 0.5
HEADERS = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class RoundResult:
    ok: int  # 200 answers completed in the measured window
    errors: int  # anything else (status, connection error, timeout)
    wall_s: float
    latencies_ms: list[float]
    client_cpu_s: float  # this process's CPU time over the measured window
    server_cpu_s: float = math.nan  # the server's CPU time over the same window (closed_loop's server_cpu)

    @property
    def req_per_s(self) -> float:
        return self.ok / self.wall_s if self.wall_s else math.nan

    def _quantile(self, q: float) -> float:
        if not self.latencies_ms:
            return math.nan
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    @property
    def p50_ms(self) -> float:
        return self._quantile(0.5)

    @property
    def p99_ms(self) -> float:
        return self._quantile(0.99)

    @property
    def client_cpu_share(self) -> float:
        """The client's CPU seconds per wall second (1.0: one whole core)."""
        return self.client_cpu_s / self.wall_s if self.wall_s else math.nan

    @property
    def client_ceiling(self) -> float:
        """The req/s this client would reach with one core to itself."""
        return (self.ok + self.errors) / self.client_cpu_s if self.client_cpu_s else math.nan


def _cpu_s() -> float:
    times = psutil.Process().cpu_times()
    return float(times.user + times.system)


async def closed_loop(
    url: str,
    bodies: list[bytes],
    concurrency: int,
    seconds: float,
    timeout_s: float = 60.0,
    *,
    server_cpu: Callable[[], float] | None = None,
) -> RoundResult:
    """``concurrency`` workers post ``bodies`` (in turn) for WARMUP_S + ``seconds``; the last ``seconds`` count.

    ``server_cpu``: the server's CPU seconds so far, read at the start and the end of the measured window
    (so that the server's CPU per request counts neither the warm-up nor the requests still in flight at the
    end, as the requests counted do not)."""
    counter = itertools.count()
    latencies: list[float] = []
    errors = [0]
    measuring = [False]
    stop = [False]
    timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def worker(session: aiohttp.ClientSession) -> None:
        while not stop[0]:
            body = bodies[next(counter) % len(bodies)]
            started = time.perf_counter()
            try:
                async with session.post(url, data=body, headers=HEADERS, timeout=timeout) as response:
                    await response.read()
                    good = response.status == 200
            except (aiohttp.ClientError, TimeoutError):
                good = False
            if not measuring[0] or stop[0]:
                continue
            if good:
                latencies.append((time.perf_counter() - started) * 1000.0)
            else:
                errors[0] += 1

    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        tasks = [asyncio.create_task(worker(session)) for _ in range(concurrency)]
        await asyncio.sleep(WARMUP_S)
        measuring[0] = True
        server0 = server_cpu() if server_cpu is not None else math.nan
        cpu0, wall0 = _cpu_s(), time.perf_counter()
        await asyncio.sleep(seconds)
        stop[0] = True
        cpu1, wall1 = _cpu_s(), time.perf_counter()
        server1 = server_cpu() if server_cpu is not None else math.nan
        _, pending = await asyncio.wait(tasks, timeout=timeout_s)
        for task in pending:
            task.cancel()
    return RoundResult(len(latencies), errors[0], wall1 - wall0, latencies, cpu1 - cpu0, server1 - server0)
