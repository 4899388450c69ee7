"""How kgserve's throughput scales with front-end processes (``server.workers``), issue 14.

``python -m benchmarks.workers_scaling [--counts 1,2,4] [--clients 2] [--in-flight 256] [--rounds 3]``
prints a Markdown table.

One kgserve per count runs side by side, each with ``server.workers: N`` and N engines (one per front end).
The engines are benchmarks.rig.standin_engine (canned real KataGo answers, no search), so what is measured is
the front ends, not an engine. The load comes from ``--clients`` processes, each an aiohttp closed-loop
client (benchmarks.rig.client) with its share of the requests in flight, all starting their round at the
same instant: one client process tops out at a few thousand req/s per core, which is below what several
front ends answer on a machine with cores to spare. The servers alternate round by round (order reversed
every other round) and the table gives medians. On a machine with fewer cores than clients + front ends +
engines the processes share cores and the figure says more about the machine than about kgserve.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass

from benchmarks.hotpath import SMALL, single_bodies
from benchmarks.rig.client import RoundResult, closed_loop
from benchmarks.rig.servers import ServerProcess, kgserve_server, serving_cpu_s, standin_settings
from kgbench.targets.sim import cleanup_devices, sim_env, sim_settings
from kgbench.track.machine import machine_line

__all__ = ["ScalingRound", "main", "scaling_table"]

START_SKEW_S = 1.0  # the clients' round starts this long after it is handed out: every process is ready by then


@dataclass(frozen=True)
class ScalingRound:
    """One round against one server, the client processes' results merged."""

    ok: int
    errors: int
    wall_s: float
    latencies_ms: list[float]
    client_cpu_s: float
    server_cpu_s: float

    @classmethod
    def merge(cls, parts: list[RoundResult]) -> ScalingRound:
        # the clients measured the same window (same start instant, same length): their wall times agree; the
        # first client read the server's CPU at the ends of its window (the others did not: nan)
        return cls(
            ok=sum(p.ok for p in parts),
            errors=sum(p.errors for p in parts),
            wall_s=statistics.mean(p.wall_s for p in parts),
            latencies_ms=[x for p in parts for x in p.latencies_ms],
            client_cpu_s=sum(p.client_cpu_s for p in parts),
            server_cpu_s=parts[0].server_cpu_s,
        )

    @property
    def req_per_s(self) -> float:
        return self.ok / self.wall_s

    def quantile_ms(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")

    @property
    def cpu_us_per_query(self) -> float:
        return self.server_cpu_s / max(1, self.ok) * 1e6


def _client_round(
    url: str, bodies: list[bytes], concurrency: int, seconds: float, start_at: float, server_pid: int | None
) -> RoundResult:
    """One client process's part of a round (runs in a pool process); with ``server_pid``, it also reads the
    server's CPU at the ends of its measured window."""
    time.sleep(max(0.0, start_at - time.time()))
    server_cpu = (lambda: serving_cpu_s(server_pid)) if server_pid is not None else None
    return asyncio.run(closed_loop(url, bodies, concurrency, seconds, server_cpu=server_cpu))


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _round(
    pool: multiprocessing.pool.Pool,
    server: ServerProcess,
    bodies: list[bytes],
    in_flight: int,
    clients: int,
    seconds: float,
) -> ScalingRound:
    start_at = time.time() + START_SKEW_S
    url = server.url + "/analysis"
    shares = [
        (url, bodies[i::clients], share, seconds, start_at, server.proc.pid if i == 0 else None)
        for i, share in enumerate(_split(in_flight, clients))
    ]
    return ScalingRound.merge(pool.starmap(_client_round, shares, chunksize=1))


def scaling_table(counts: list[int], clients: int, in_flight: int, rounds: int, seconds: float) -> str:
    bodies = single_bodies(SMALL)
    results: dict[int, list[ScalingRound]] = {count: [] for count in counts}
    with ExitStack() as stack:
        servers: dict[int, ServerProcess] = {}
        for count in counts:
            base = standin_settings(sim_settings(count))
            settings = base.model_copy(update={"server": base.server.model_copy(update={"workers": count})})
            servers[count] = stack.enter_context(kgserve_server(settings, sim_env(0, device=f"scaling{count}")))
        # spawn: the pool's processes must not inherit the servers' pipes or the parent's event loop
        pool = stack.enter_context(multiprocessing.get_context("spawn").Pool(clients))
        for index in range(rounds):
            for count in counts if index % 2 == 0 else counts[::-1]:
                results[count].append(_round(pool, servers[count], bodies, in_flight, clients, seconds))
                print(f"workers {count} round {index}: {results[count][-1].req_per_s:,.0f} req/s", file=sys.stderr)
    rows = [
        f"{machine_line()}; {len(os.sched_getaffinity(0))} usable cores; {clients} client processes, "
        f"{in_flight} in flight, ~1 KB queries, one stand-in engine per front end; {rounds} alternating rounds of "
        f"{seconds:g} s, medians",
        "",
        "| front-end processes | req/s | vs 1 | p50 / p99 ms | kgserve CPU µs / query (all front ends) "
        "| client CPU share | errors |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    base_rate = statistics.median(r.req_per_s for r in results[counts[0]]) / counts[0] if counts else 1.0
    for count, cells in results.items():
        rate = statistics.median(r.req_per_s for r in cells)
        rows.append(
            f"| {count} | {rate:,.0f} | {rate / base_rate:.2f}x "
            f"| {statistics.median(r.quantile_ms(0.5) for r in cells):.1f} / "
            f"{statistics.median(r.quantile_ms(0.99) for r in cells):.1f} "
            f"| {statistics.median(r.cpu_us_per_query for r in cells):,.0f} "
            f"| {statistics.median(r.client_cpu_s / r.wall_s for r in cells):.2f} "
            f"| {sum(r.errors for r in cells)} |"
        )
    return "\n".join(rows)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.workers_scaling", description=__doc__.split("\n")[0])
    p.add_argument("--counts", default="1,2,4", help="front-end process counts, comma-separated (first: the base)")
    p.add_argument("--clients", type=int, default=2, help="client processes")
    p.add_argument("--in-flight", type=int, default=256, help="requests in flight, over all client processes")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds per count")
    p.add_argument("--seconds", type=float, default=3.0, help="measured seconds per round (after 0.5 s warm-up)")
    args = p.parse_args(argv)
    try:
        args.counts = [int(c) for c in args.counts.split(",")]
    except ValueError:
        p.error(f"--counts takes integers separated by commas, got {args.counts!r}")
    if not args.counts or min(args.counts) < 1 or args.clients < 1 or args.in_flight < args.clients:
        p.error("--counts >= 1 each, --clients >= 1, --in-flight >= --clients")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        print(scaling_table(args.counts, args.clients, args.in_flight, args.rounds, args.seconds))
    finally:
        cleanup_devices()
    return 0


if __name__ == "__main__":
    sys.exit(main())
