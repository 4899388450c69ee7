"""What one query in flight costs kgserve in memory: the figures behind the memory budget's cost model
(kgserve.admission.budget: QUERY_BYTES + LINE_COPIES x the query's line).

``python -m benchmarks.query_cost [--sizes 1000 100000 1000000] [--count 100]`` prints a Markdown table.

For each query size, kgserve (a subprocess, one sim engine at real speed, the budget and per-client caps lifted so
that nothing is refused) gets `--count` concurrent requests of one query each (19x19, 100,000 visits, a `pad`
field making up the size, a deadline that outlasts the measurement); once they are all in flight its RSS is read,
then every client leaves. The cost per query is (RSS in flight - RSS before) / count; the model's is beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path

import aiohttp
import yaml

from benchmarks.common import rss_mb
from benchmarks.hostile_attacks.common import metric
from kgbench.targets.kgserve_process import KgserveProcess
from kgbench.targets.sim import cleanup_devices, sim_env, sim_settings
from kgbench.track.machine import machine_line
from kgserve.admission.budget import query_cost


def padded(index: int, size: int) -> bytes:
    body = {"id": f"q{index}", "moves": [], "rules": "chinese", "komi": 7.5, "boardXSize": 19, "boardYSize": 19}
    body["maxVisits"] = 100_000
    text = json.dumps(body).encode()
    return text[:-1] + b',"pad":"' + b"x" * max(0, size - len(text) - 9) + b'"}'


async def in_flight(url: str, pid: int, size: int, count: int) -> tuple[float, float]:
    """RSS before and with `count` queries of `size` bytes in flight (MB)."""
    before = rss_mb(pid) or 0.0
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=600)) as session:

        async def one(index: int) -> None:
            headers = {"X-Deadline-Ms": "120000"}
            with contextlib.suppress(aiohttp.ClientError, TimeoutError, asyncio.CancelledError):
                async with session.post(url + "/analysis", data=padded(index, size), headers=headers) as answer:
                    await answer.read()

        tasks = [asyncio.create_task(one(index)) for index in range(count)]
        for _ in range(1200):
            if await metric(url, "kgserve_inflight_queries") >= count:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)
        during = rss_mb(pid) or 0.0
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for _ in range(300):
        if await metric(url, "kgserve_inflight_queries") == 0:
            break
        await asyncio.sleep(0.1)
    return before, during


def run(args: argparse.Namespace) -> list[tuple[int, int, float, float]]:
    settings = sim_settings(1)
    data = settings.model_dump(mode="json")
    data["server"].update(host="127.0.0.1", port=0, auth_token_env=None)
    data["limits"].update(
        max_inflight_queries=4096,
        max_inflight_per_client=4096,
        max_connections_per_client=4096,
        memory_budget_bytes=16 << 30,
        memory_per_client_bytes=16 << 30,
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="kgserve-cost-") as tmp:
        config = Path(tmp) / "kgserve.yaml"
        config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        env = sim_env(None, device=f"cost{os.getpid()}", KGSERVE_SIM_SPEED="1")
        proc = KgserveProcess(config, Path(tmp) / "kgserve.log", env)
        proc.start()
        try:
            proc.wait_ready(90)
            assert proc.url is not None and proc.proc is not None
            asyncio.run(in_flight(proc.url, proc.proc.pid, 1000, 20))  # warm-up
            for size in args.sizes:
                count = max(4, min(args.count, int(args.max_bytes / size)))
                before, during = asyncio.run(in_flight(proc.url, proc.proc.pid, size, count))
                rows.append((size, count, before, during))
                print(_row(*rows[-1]), file=sys.stderr, flush=True)
        finally:
            proc.stop(grace_s=5)
    return rows


def _row(size: int, count: int, before: float, during: float) -> str:
    measured = (during - before) * 2**20 / count
    model = query_cost(size)
    return (
        f"| {size:,} | {count} | {before:.0f} → {during:.0f} | {measured / 1024:,.0f} KiB | {model / 1024:,.0f} KiB | "
        f"{model / measured:.1f} |"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.query_cost", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 100_000, 1_000_000])
    p.add_argument("--count", type=int, default=200, help="queries in flight (fewer for big ones: --max-bytes)")
    p.add_argument("--max-bytes", type=float, default=200e6, help="bytes of queries in flight at most")
    args = p.parse_args(argv)
    try:
        rows = run(args)
    finally:
        cleanup_devices()
    head = (
        "| query bytes | in flight | kgserve RSS before → in flight (MB) | measured per query | the budget's model | "
        "model / measured |\n|---:|---:|---|---:|---:|---:|\n"
    )
    print(f"### Memory per query in flight\n\n{machine_line()}\n\n" + head + "\n".join(_row(*row) for row in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
