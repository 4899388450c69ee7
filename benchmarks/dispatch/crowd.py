"""One query each from a crowd of client identities against the same load from a few (issue 36 item 5).

``python -m benchmarks.dispatch.crowd [--clients 1488 24] [--in-flight 1488] [--threads 128] [--measure-s 20]
[--rounds 2] [--kgserve-path DIR]``

kgserve (runtime/config.yaml's settings, the thread reserve as shipped, the sim serving runtime/katago_serving.cfg
with `--threads` analysis threads) trusts 127.0.0.1 as a proxy (`server.trusted_proxies`), and the load generator
sends from there with `X-Forwarded-For: 10.x.y.z`: `--in-flight` small queries (9x9, 5 visits) kept in flight
over as many connections, spread over N client identities (a new query for each answer, from the same identity),
as a review site behind HAProxy looks to kgserve. Per N: answers/s over `--measure-s` after a warm-up, kgserve's
own CPU seconds per answer (its process, not the engine's), and /healthz's time (asked every 0.5 s meanwhile).
Runs alternate between the Ns. `--kgserve-path DIR` serves another checkout's kgserve (e.g. main's, for the
figures before), with the same settings less the keys it does not know.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp
import psutil

from benchmarks.dispatch.rig import load_average, print_figures, served, settings_for
from benchmarks.hostile_attacks.common import PROBE

NEW_KEYS = {"engine": ("lend_bound_s",)}  # settings an older kgserve refuses (--kgserve-path)


def identity(index: int) -> str:
    return f"10.{index // 65536 % 256}.{index // 256 % 256}.{index % 256 + 1}"


async def _load(url: str, args: argparse.Namespace, clients: int) -> dict[str, Any]:
    began = time.monotonic()
    start, end = began + args.warmup_s, began + args.warmup_s + args.measure_s
    answers = 0
    failures: dict[int, int] = {}
    healthz: list[float] = []
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def lane(index: int) -> None:
            nonlocal answers
            headers = {"X-Forwarded-For": identity(index % clients), "Content-Type": "application/json"}
            while time.monotonic() < end:
                async with session.post(url + "/analysis", data=PROBE, headers=headers) as answer:
                    await answer.read()
                    if answer.status != 200:
                        failures[answer.status] = failures.get(answer.status, 0) + 1
                        await asyncio.sleep(0.1)
                        continue
                if start <= time.monotonic() < end:
                    answers += 1

        async def health() -> None:
            while time.monotonic() < end:
                sent = time.monotonic()
                async with session.get(url + "/healthz") as answer:
                    await answer.read()
                if start <= sent < end:
                    healthz.append(time.monotonic() - sent)
                await asyncio.sleep(0.5)

        await asyncio.gather(*(lane(index) for index in range(args.in_flight)), health())
    return {"answers": answers, "failures": failures, "healthz": healthz}


def one_run(clients: int, args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    settings, env = settings_for("sim", args.threads, directory)
    overrides: dict[str, dict[str, Any]] = {"server": {"trusted_proxies": ["127.0.0.1"]}}
    drop: Mapping[str, tuple[str, ...]] = {}
    if args.kgserve_path is not None:
        env = {**env, "PYTHONPATH": str(args.kgserve_path)}
        drop = NEW_KEYS
    before = load_average()
    with served(settings, env, overrides, drop=drop, cwd=args.kgserve_path) as proc:
        assert proc.url is not None and proc.proc is not None
        process = psutil.Process(proc.proc.pid)
        cpu_before = _cpu(process)
        result = asyncio.run(_load(proc.url, args, clients))
        cpu_after = _cpu(process)
    result["cpu_s"] = cpu_after - cpu_before
    result.update(clients=clients, load=f"{before} -> {load_average()}")
    rate = result["answers"] / args.measure_s
    cpu = 1000.0 * result["cpu_s"] / result["answers"] if result["answers"] else float("nan")
    health = result["healthz"]
    print(
        f"# {clients} clients: {rate:.0f} answers/s, kgserve CPU {cpu:.2f} ms/answer (whole run), /healthz median "
        f"{1000 * statistics.median(health):.0f} ms worst {1000 * max(health):.0f} ms, refused {result['failures']}, "
        f"load {result['load']}",
        file=sys.stderr,
        flush=True,
    )
    return result


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def table(args: argparse.Namespace, runs: list[dict[str, Any]]) -> str:
    source = f"kgserve from {args.kgserve_path}" if args.kgserve_path else "this checkout's kgserve"
    lines = [
        f"sim engine, {args.threads} analysis threads, thread reserve shipped · {args.in_flight} queries in flight "
        f"(9x9, 5 visits), X-Forwarded-For from a trusted proxy on loopback · {args.warmup_s:g} s warm-up, "
        f"{args.measure_s:g} s measured · {source}",
        "",
        "| client identities | answers/s | kgserve CPU ms/answer | /healthz median ms | /healthz worst ms | refused | "
        "machine load |",
        "|---:|---:|---:|---:|---:|---|---|",
    ]
    for run in runs:
        rate = run["answers"] / args.measure_s
        cpu = 1000.0 * run["cpu_s"] / run["answers"] if run["answers"] else float("nan")
        health = run["healthz"]
        lines.append(
            f"| {run['clients']} | {rate:.0f} | {cpu:.2f} | {1000 * statistics.median(health):.0f} | "
            f"{1000 * max(health):.0f} | {run['failures'] or 'none'} | {run['load']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, nargs="+", default=[1488, 24])
    parser.add_argument("--in-flight", type=int, default=1488)
    parser.add_argument("--threads", type=int, default=128)
    parser.add_argument("--warmup-s", type=float, default=5.0)
    parser.add_argument("--measure-s", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--kgserve-path", type=Path, help="a checkout whose kgserve to serve (figures before)")
    args = parser.parse_args(argv)
    with contextlib.suppress(ValueError, OSError):
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))
    runs = []
    with tempfile.TemporaryDirectory(prefix="kgbench-crowd-") as tmp:
        for _ in range(args.rounds):
            for clients in args.clients:
                runs.append(one_run(clients, args, Path(tmp)))
    print_figures("sim", table(args, runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
