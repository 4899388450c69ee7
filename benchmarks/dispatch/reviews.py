"""Whole-game reviews beside other clients (issue 33 item 1, its two cases), the thread reserve shipped against off.

``python -m benchmarks.dispatch.reviews [--engine sim|katago] [--threads 128] [--rounds R] [--only review|interactive]``

- review: one client keeps three small queries going (WebSocket, 127.0.1.21, `--small-visits`); another posts a
  `--review-turns`-turn review of one game (`analyzeTurns` over it, `--review-visits`, HTTP, 127.0.1.20) and waits
  for all of it: its time, against the same review with nobody else on the engine.
- interactive: one client posts a `--batch-turns`-turn batch query (HTTP, 127.0.1.23); 2 s later another sends
  an interactive query (WebSocket, 127.0.1.22, `--interactive-visits`) every second, five times: their times,
  against the same queries on an idle engine.

Each case runs in a fresh kgserve per mode (runtime/config.yaml's settings, the engine with `--threads` analysis
threads), modes alternating (shipped, off, shipped, ...); the alone figure is taken after one unmeasured run of it
(the engine's first searches are slower). A game longer than the moves of kgbench's sample games
is padded with passes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.dispatch.rig import ENGINES, load_average, print_figures, recv_final, served, settings_for, ws
from benchmarks.hostile_attacks.common import session_from
from kgbench.load.traffic import build_query, load_games

MODES = ("shipped", "off")


def game_query(name: str, turns: int, visits: int) -> dict[str, Any]:
    """A query of `turns` analysed turns over one of kgbench's sample games (the longest; padded with passes)."""
    game = max(load_games(), key=lambda each: len(each.moves))
    body = build_query(game, len(game.moves), 0, game.komi)
    moves = list(body["moves"])
    while len(moves) < turns - 1:
        moves.append(["W" if moves[-1][0] == "B" else "B", "pass"])
    body.update(id=name, moves=moves, maxVisits=visits, analyzeTurns=list(range(turns)))
    return body


def small_query(name: str, visits: int, moves: int = 30) -> dict[str, Any]:
    body = game_query(name, 2, visits)
    body["moves"] = body["moves"][:moves]
    body.pop("analyzeTurns")
    return body


async def _post(url: str, address: str, body: dict[str, Any]) -> tuple[float, list[dict[str, Any]]]:
    async with session_from(address, timeout=aiohttp.ClientTimeout(total=900)) as session:
        sent = time.monotonic()
        async with session.post(url + "/analysis", data=json.dumps(body)) as answer:
            lines = [json.loads(line) for line in (await answer.read()).splitlines() if line.strip()]
            if answer.status != 200:
                raise RuntimeError(f"{body['id']}: {answer.status} {lines[:1]}")
        return time.monotonic() - sent, lines


async def review_case(url: str, args: argparse.Namespace, beside: bool) -> float:
    """The review's time, with the three small queries going (beside) or alone."""
    stop = asyncio.Event()

    async def small() -> None:
        async with ws(url, "127.0.1.21") as socket:
            counter = 0
            for _ in range(3):
                await socket.send(json.dumps(small_query(f"s{counter}", args.small_visits)))
                counter += 1
            while not stop.is_set():
                await recv_final(socket)
                await socket.send(json.dumps(small_query(f"s{counter}", args.small_visits)))
                counter += 1
            await socket.send(json.dumps({"id": "all", "action": "terminate_all"}))

    helper = asyncio.create_task(small()) if beside else None
    await asyncio.sleep(2.0 if beside else 0.0)
    seconds, lines = await _post(url, "127.0.1.20", game_query("review", args.review_turns, args.review_visits))
    stop.set()
    if helper is not None:
        await helper
    answered = sum(1 for line in lines if "moveInfos" in line)
    if answered != args.review_turns:
        raise RuntimeError(f"the review got {answered} of {args.review_turns} turns analysed")
    return seconds


async def interactive_case(url: str, args: argparse.Namespace, beside: bool) -> list[float]:
    """The interactive queries' times, beside the batch query (once its first turn is answered) or alone."""
    batch: asyncio.Task[Any] | None = None
    if beside:
        body = game_query("batch", args.batch_turns, args.batch_visits)
        batch = asyncio.create_task(_post(url, "127.0.1.23", body))
        await asyncio.sleep(2.0)  # it holds the engine
    times: list[float] = []
    async with ws(url, "127.0.1.22") as socket:
        for index in range(5):
            sent = time.monotonic()
            await socket.send(json.dumps(small_query(f"i{index}", args.interactive_visits)))
            _, at = await recv_final(socket)
            times.append(at - sent)
            await asyncio.sleep(1.0)
    if batch is not None:
        batch.cancel()  # a disconnect: kgserve terminates it
        await asyncio.gather(batch, return_exceptions=True)
    return times


def run_case(case: str, mode: str, args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    settings, env = settings_for(args.engine, args.threads, directory)
    engine = {"thread_reserve": 0.0} if mode == "off" else {}
    before = load_average()
    with served(settings, env, {"engine": engine}) as proc:
        assert proc.url is not None
        runner = review_case if case == "review" else interactive_case
        asyncio.run(runner(proc.url, args, False))  # warm-up: the engine's first searches
        alone = asyncio.run(runner(proc.url, args, False))
        beside = asyncio.run(runner(proc.url, args, True))
    row = {"case": case, "mode": mode, "alone": alone, "beside": beside, "load": f"{before} -> {load_average()}"}
    print(f"# {json.dumps(row)}", file=sys.stderr, flush=True)
    return row


def _seconds(value: float | list[float]) -> str:
    if isinstance(value, list):
        return f"median {statistics.median(value):.2f} s, worst {max(value):.2f} s"
    return f"{value:.2f} s"


def table(args: argparse.Namespace, rows: list[dict[str, Any]]) -> str:
    lines = [
        f"{args.engine} engine · {args.threads} analysis threads · review {args.review_turns} turns x "
        f"{args.review_visits} visits beside 3 x {args.small_visits} visits · batch {args.batch_turns} turns x "
        f"{args.batch_visits} visits, interactive {args.interactive_visits} visits · modes alternating",
        "",
        "| case | reserve | alone | beside the other client | machine load |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['case']} | {row['mode']} | {_seconds(row['alone'])} | {_seconds(row['beside'])} | {row['load']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--engine", choices=ENGINES, default="sim")
    parser.add_argument("--threads", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", choices=("review", "interactive"), nargs="*", default=["review", "interactive"])
    parser.add_argument("--review-turns", type=int, default=200)
    parser.add_argument("--review-visits", type=int, default=50)
    parser.add_argument("--small-visits", type=int, default=100)
    parser.add_argument("--batch-turns", type=int, default=721)
    parser.add_argument("--batch-visits", type=int, default=200)
    parser.add_argument("--interactive-visits", type=int, default=100)
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="kgbench-reviews-") as tmp:
        for _ in range(args.rounds):
            for case in args.only:
                for mode in MODES:
                    rows.append(run_case(case, mode, args, Path(tmp)))
    print_figures(args.engine, table(args, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
