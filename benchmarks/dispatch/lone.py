"""A lone client with the shipped thread reserve against `engine.thread_reserve: 0` (issue 33 item 1), side by side.

``python -m benchmarks.dispatch.lone --engine katago|sim --threads N --visits V [--rounds R] [--in-flight C]
[--connections K] [--measure-s S] [--lend-bound-s B] [--newcomer]``

Each run starts kgserve afresh (runtime/config.yaml's settings; the engine with N analysis threads: the sim serves
runtime/katago_serving.cfg with N threads, the real CPU KataGo issue 33's cfg, N x 1 search thread, batch 4) and one
client (127.0.0.1) keeps C queries in flight over K WebSockets (positions from kgbench's query source, V visits
each) for a warm-up, then counts the answers of S seconds. Runs alternate: shipped reserve, reserve off, shipped,
off, ... (`--lend-bound-s` sets engine.lend_bound_s of the shipped runs). Besides answers/s, each run samples
/readyz every 50 ms: the share of samples in which every analysis thread had a turn written (the engine's work is
the same as with the reserve off exactly when it never idles a thread; a figure the machine's other load does not
move as it moves answers/s). With `--newcomer` a second client
(127.0.1.9) posts a small query every 0.5 s during the measured seconds: its waits are printed (the first client
is then no longer alone: its figures are not the lone client's). Prints each run (with the machine's load
average) and a table: answers/s per mode (median of the rounds) and the change.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from benchmarks.dispatch.rig import ENGINES, load_average, print_figures, recv_final, served, settings_for, ws
from benchmarks.hostile_attacks.common import PROBE, session_from
from kgbench.load.traffic import QuerySource

MODES = ("shipped", "off")


@dataclass
class Run:
    mode: str
    answers: int = 0
    seconds: float = 0.0
    load_before: str = ""
    load_after: str = ""
    waits: list[float] = field(default_factory=list)
    busy: list[bool] = field(default_factory=list)  # per /readyz sample: every thread had a turn written

    @property
    def busy_share(self) -> float:
        return sum(self.busy) / len(self.busy) if self.busy else float("nan")

    @property
    def rate(self) -> float:
        return self.answers / self.seconds if self.seconds else 0.0


async def _client(url: str, args: argparse.Namespace, run: Run) -> None:
    source = QuerySource.from_dirs(seed=33)
    counter = iter(range(1 << 40))
    began = time.monotonic()
    start, end = began + args.warmup_s, began + args.warmup_s + args.measure_s
    per = max(1, args.in_flight // args.connections)

    def query() -> str:
        _, body = source.next()
        body.update(id=f"q{next(counter)}", maxVisits=args.visits)
        return json.dumps(body)

    async def lane(index: int) -> None:
        async with ws(url) as socket:
            for _ in range(per):
                await socket.send(query())
            while time.monotonic() < end:
                _, at = await recv_final(socket)
                if start <= at < end:
                    run.answers += 1
                await socket.send(query())
            await socket.send(json.dumps({"id": "all", "action": "terminate_all"}))

    async def newcomer() -> None:
        await asyncio.sleep(max(0.0, start - time.monotonic()))
        async with session_from("127.0.1.9", timeout=aiohttp.ClientTimeout(total=120)) as session:
            while time.monotonic() < end:
                sent = time.monotonic()
                async with session.post(url + "/analysis", data=PROBE) as answer:
                    await answer.read()
                    if answer.status != 200:
                        raise RuntimeError(f"the newcomer got {answer.status}")
                run.waits.append(time.monotonic() - sent)
                await asyncio.sleep(0.5)

    async def occupancy() -> None:
        """Whether the engine had a turn written for each thread, every 50 ms (/readyz's `pending`: the request
        lines written to it and not finished; with the reserve off, every query in flight)."""
        await asyncio.sleep(max(0.0, start - time.monotonic()))
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < end:
                async with session.get(url + "/readyz") as answer:
                    engines = (await answer.json())["engines"]
                run.busy.append(sum(int(engine["pending"]) for engine in engines) >= args.threads)
                await asyncio.sleep(0.05)

    tasks = [lane(index) for index in range(args.connections)]
    tasks.append(occupancy())
    if args.newcomer:
        tasks.append(newcomer())
    await asyncio.gather(*tasks)
    run.seconds = args.measure_s


def _waits(waits: list[float]) -> str:
    return f"waits median {statistics.median(waits):.3f} s, worst {max(waits):.3f} s"


def one_run(mode: str, args: argparse.Namespace, directory: Path) -> Run:
    settings, env = settings_for(args.engine, args.threads, directory)
    engine: dict[str, object] = {"thread_reserve": 0.0} if mode == "off" else {}
    if mode == "shipped" and args.lend_bound_s is not None:
        engine["lend_bound_s"] = args.lend_bound_s
    run = Run(mode, load_before=load_average())
    with served(settings, env, {"engine": engine}) as proc:
        assert proc.url is not None
        asyncio.run(_client(proc.url, args, run))
    run.load_after = load_average()
    waits = f", newcomer {_waits(run.waits)}" if run.waits else ""
    print(
        f"# {mode}: {run.answers} answers in {run.seconds:g} s = {run.rate:.2f}/s, every thread busy in "
        f"{run.busy_share:.1%} of {len(run.busy)} samples (load {run.load_before} -> {run.load_after}){waits}",
        file=sys.stderr,
        flush=True,
    )
    return run


def table(args: argparse.Namespace, runs: list[Run]) -> str:
    rates = {mode: [run.rate for run in runs if run.mode == mode] for mode in MODES}
    medians = {mode: statistics.median(values) for mode, values in rates.items() if values}
    change = medians["shipped"] / medians["off"] - 1 if medians.get("off") else float("nan")
    bound = "" if args.lend_bound_s is None else f" (lend_bound_s {args.lend_bound_s:g})"
    lines = [
        f"{args.engine} engine · {args.threads} analysis threads · {args.visits} visits · one client, "
        f"{args.in_flight} in flight over {args.connections} WebSocket(s) · {args.warmup_s:g} s warm-up, "
        f"{args.measure_s:g} s measured · {args.rounds} alternating round(s){bound}",
        "",
        "| mode | answers/s, each run | median | vs reserve off | every thread busy (share of samples, each run) |",
        "|---|---|---:|---:|---|",
    ]
    for mode in MODES:
        each = ", ".join(f"{value:.2f}" for value in rates[mode])
        versus = f"{change:+.1%}" if mode == "shipped" else ""
        busy = ", ".join(f"{run.busy_share:.1%}" for run in runs if run.mode == mode)
        lines.append(f"| {mode} | {each} | {medians.get(mode, float('nan')):.2f} | {versus} | {busy} |")
    for mode in MODES:
        waits = [wait for run in runs if run.mode == mode for wait in run.waits]
        if waits:
            lines.append(f"\nnewcomer beside the client, reserve {mode}: {len(waits)} queries, {_waits(waits)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--engine", choices=ENGINES, default="sim")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--visits", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--in-flight", type=int, help="queries the client keeps in flight (default 4 x threads)")
    parser.add_argument("--connections", type=int, help="WebSockets they go over (default 1 per 64 in flight)")
    parser.add_argument("--warmup-s", type=float, default=5.0)
    parser.add_argument("--measure-s", type=float, default=20.0)
    parser.add_argument("--lend-bound-s", type=float, help="engine.lend_bound_s of the shipped runs")
    parser.add_argument("--newcomer", action="store_true", help="a second client's small query every 0.5 s")
    args = parser.parse_args(argv)
    args.in_flight = args.in_flight or 4 * args.threads
    args.connections = args.connections or max(1, args.in_flight // 64)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="kgbench-lone-") as tmp:
        for _ in range(args.rounds):
            for mode in MODES:
                runs.append(one_run(mode, args, Path(tmp)))
    print_figures(args.engine, table(args, runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
