"""One batch client at high concurrency against kgserve on its SHIPPED limits (issue 40), alone and beside a second
client: does every row get its answer, and is the second client still served?

``python -m benchmarks.batch_client [--engine katago|sim] [--rows 2000] [--connections 512 1024] [--probes 10]``

The client is the shape the people this tool is for run (issue 40): positions of KataGo self-play records
(assets/analysis/games/19x19, games in file order, each game's positions one after another), one query per position
(`analyzeTurns: [n]`, the game's moves up to it, rules and komi from the record, no `maxVisits`: the cfg's), sent by
ONE process from one address with aiohttp and N connections (512, the client's default, and 1,024), a 60 s timeout,
3 attempts 1 s and 2 s apart, `Retry-After` not read; a row that fails all three is lost (`{}`).

kgserve runs as a subprocess with runtime/config.yaml's limits untouched (only the engine is chosen: the real CPU
KataGo of KGBENCH_KATAGO_BIN / KGBENCH_KATAGO_MODEL with the issue's cfg, 4 analysis threads and 16 visits, or the
sim). Printed: per run, rows answered, HTTP 429s, other failures, rows/s; the second client's median latency
(127.0.0.2, one small query at a time, every 0.5 s) alone and beside the 512-connection batch, against the target
`beside <= 3 x alone + 0.5 s`. Exit status 0 only if every row of every run was answered and the target held.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from kgbench.load.games.library import GAMES_DIR, game_files, query_rules
from kgbench.load.games.sgf import parse_sgf
from kgbench.targets.kgserve_process import KgserveProcess
from kgbench.targets.sim import sim_env
from kgbench.track.machine import machine_line
from kgserve.settings import BackendSettings, Settings, load_settings

__all__ = [
    "ATTEMPTS",
    "BACKOFF_S",
    "BatchResult",
    "batch_rows",
    "probe_query",
    "run_batch",
    "second_client",
    "shipped_settings",
]

ATTEMPTS = 3
BACKOFF_S = (1.0, 2.0)  # before the second and the third attempt
TIMEOUT_S = 60.0
SECOND_ADDRESS = "127.0.0.2"  # the second client: another address, so kgserve sees another client
BATCH_CFG = """# benchmarks.batch_client: issue 40's engine (real CPU KataGo, b6c96, 4 analysis threads, 16 visits)
maxVisits = 16
numAnalysisThreads = 4
numSearchThreadsPerAnalysisThread = 1
nnMaxBatchSize = 8
nnCacheSizePowerOfTwo = 18
nnMutexPoolSizePowerOfTwo = 14
reportAnalysisWinratesAs = BLACK
"""


def _game_queries(path: Path) -> Iterator[dict[str, Any]]:
    game = parse_sgf(path.read_text(encoding="utf-8"))
    moves = [[colour, vertex] for colour, vertex in game.moves]
    base: dict[str, Any] = {
        "rules": query_rules(game.rules),
        "komi": game.komi,
        "boardXSize": game.size,
        "boardYSize": game.size,
    }
    if game.setup:
        base["initialStones"] = [[colour, vertex] for colour, vertex in game.setup]
    for turn in range(len(moves) + 1):
        yield {"id": f"{path.stem}:{turn}", "moves": moves[:turn], "analyzeTurns": [turn], **base}


def batch_rows(count: int, size: int = 19, skip: int = 0, *, reverse: bool = False) -> list[dict[str, Any]]:
    """`count` positions of the repository's self-play games of `size` after the first `skip`, games in file order
    (`reverse`: from the last game), each game's positions one after another (again from the first game if there are
    fewer). Runs of one benchmark take slices of their own: KataGo's NN cache would answer a repeated position."""
    files = game_files(GAMES_DIR, [size])
    if not files:
        raise SystemExit(f"no games in {GAMES_DIR / f'{size}x{size}'}")
    if reverse:
        files = files[::-1]
    rows: list[dict[str, Any]] = []
    seen = 0
    while len(rows) < count:
        for path in files:
            for query in _game_queries(path):
                seen += 1
                if seen <= skip:
                    continue
                rows.append({**query, "id": f"{query['id']}#{len(rows)}"})
                if len(rows) == count:
                    return rows
    return rows


@functools.cache
def _probe_positions() -> list[dict[str, Any]]:
    return batch_rows(80, reverse=True)  # from the last games: none of the batch's rows (their cache entries)


def probe_query(index: int) -> dict[str, Any]:
    """The second client's small query: one 19x19 position (the cfg's visits), a different one each time."""
    positions = _probe_positions()
    return {**positions[index % len(positions)], "id": f"probe-{index}"}


def answered(body: bytes, row_id: str) -> dict[str, Any] | None:
    """The row's final answer in a response body (one JSON line per line), or None."""
    for raw in body.splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict) and line.get("id") == row_id and line.get("isDuringSearch") is False:
            return None if "error" in line else line
    return None


@dataclass
class BatchResult:
    rows: int
    connections: int
    answers: list[dict[str, Any]] = field(default_factory=list)  # one per row, in row order; {} for a lost row
    statuses: Counter[str] = field(default_factory=Counter)  # every failed attempt: "429", "503", "timeout", ...
    seconds: float = 0.0

    @property
    def answered(self) -> int:
        return sum(1 for answer in self.answers if answer)

    @property
    def rows_per_s(self) -> float:
        return self.answered / self.seconds if self.seconds else 0.0


async def run_batch(
    url: str,
    rows: Sequence[dict[str, Any]],
    connections: int,
    *,
    local_address: str = "127.0.0.1",
    timeout_s: float = TIMEOUT_S,
) -> BatchResult:
    """Every row through one aiohttp session of `connections` connections from `local_address`: at most that many
    rows in flight, each tried ATTEMPTS times BACKOFF_S apart (Retry-After not read), a lost row answered `{}`."""
    result = BatchResult(rows=len(rows), connections=connections)
    slots = asyncio.Semaphore(connections)
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    connector = aiohttp.TCPConnector(limit=connections, local_addr=(local_address, 0))

    async def one(session: aiohttp.ClientSession, row: dict[str, Any]) -> dict[str, Any]:
        body = json.dumps(row).encode()
        async with slots:
            for attempt in range(ATTEMPTS):
                if attempt:
                    await asyncio.sleep(BACKOFF_S[attempt - 1])
                try:
                    async with session.post(url + "/analysis", data=body, timeout=timeout) as response:
                        content = await response.read()
                    answer = answered(content, row["id"]) if response.status == 200 else None
                    if answer is not None:
                        return answer
                    result.statuses[str(response.status)] += 1
                except TimeoutError:
                    result.statuses["timeout"] += 1
                except aiohttp.ClientError as exc:
                    result.statuses[type(exc).__name__] += 1
        return {}

    started = time.perf_counter()
    async with aiohttp.ClientSession(connector=connector) as session:
        result.answers = list(await asyncio.gather(*(one(session, row) for row in rows)))
    result.seconds = time.perf_counter() - started
    return result


async def second_client(
    url: str, *, count: int | None = None, stop: asyncio.Event | None = None, interval_s: float = 0.5, first: int = 0
) -> list[tuple[int, float]]:
    """One small query at a time from SECOND_ADDRESS, `interval_s` apart, `count` of them or until `stop` is set,
    the probe positions from the `first`-th on: (status, seconds) of each (status 0: no answer)."""
    results: list[tuple[int, float]] = []
    timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
    connector = aiohttp.TCPConnector(limit=1, local_addr=(SECOND_ADDRESS, 0))
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        index = first
        while (count is None or index - first < count) and not (stop is not None and stop.is_set()):
            query = probe_query(index)
            started = time.perf_counter()
            status = 0
            try:
                async with session.post(url + "/analysis", data=json.dumps(query).encode()) as response:
                    content = await response.read()
                if response.status == 200 and answered(content, query["id"]) is not None:
                    status = 200
                else:
                    status = response.status
            except (TimeoutError, aiohttp.ClientError):
                pass
            results.append((status, time.perf_counter() - started))
            index += 1
            await asyncio.sleep(interval_s)
    return results


def shipped_settings(engine: str, work: Path) -> tuple[Settings, dict[str, str]]:
    """runtime/config.yaml as shipped (its limits untouched), on loopback, with the engine of this benchmark."""
    settings = load_settings().with_overrides(backend="sim" if engine == "sim" else "eigen", port=0, host="127.0.0.1")
    cfg = work / "batch.cfg"
    cfg.write_text(BATCH_CFG, encoding="utf-8")
    updates: dict[str, Any] = {"cfg": cfg, "processes": 1, "min_ready": None, "home_data_dir": work / "katago_home"}
    if engine == "sim":
        return settings.model_copy(update={"engine": settings.engine.model_copy(update=updates)}), sim_env()
    binary, model = os.environ.get("KGBENCH_KATAGO_BIN"), os.environ.get("KGBENCH_KATAGO_MODEL")
    if not binary or not model:
        raise SystemExit("--engine katago needs KGBENCH_KATAGO_BIN and KGBENCH_KATAGO_MODEL (docs/real-katago.md)")
    updates["backends"] = {**settings.engine.backends, "eigen": BackendSettings(command=[binary], model=Path(model))}
    return settings.model_copy(update={"engine": settings.engine.model_copy(update=updates)}), dict(os.environ)


def _start(settings: Settings, env: dict[str, str], work: Path) -> KgserveProcess:
    config = work / "kgserve.yaml"
    config.write_text(yaml.safe_dump(settings.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
    proc = KgserveProcess(config, work / "kgserve.log", env)
    proc.start()
    proc.wait_ready(180.0)
    return proc


def _median_s(results: list[tuple[int, float]]) -> float:
    return statistics.median(seconds for _, seconds in results) if results else float("nan")


def _line(label: str, result: BatchResult) -> str:
    failed = ", ".join(f"{status}: {count}" for status, count in sorted(result.statuses.items())) or "none"
    return (
        f"{label:<34} {result.answered:>5} of {result.rows:<5} answered  429s {result.statuses.get('429', 0):>5}  "
        f"failed attempts ({failed})  {result.rows_per_s:6.1f} rows/s  ({result.seconds:.0f} s)"
    )


async def _run(url: str, args: argparse.Namespace) -> bool:
    ok = True
    alone = await second_client(url, count=args.probes)
    alone_ok = all(status == 200 for status, _ in alone)
    print(f"second client alone: {len(alone)} queries, median {_median_s(alone):.3f} s, all served: {alone_ok}")
    for run, connections in enumerate(args.connections):
        result = await run_batch(url, batch_rows(args.rows, skip=run * args.rows), connections)
        print(_line(f"batch alone, {connections} connections", result), flush=True)
        ok = ok and result.answered == result.rows
    stop = asyncio.Event()
    beside_task = asyncio.create_task(second_client(url, stop=stop, first=args.probes))
    rows = batch_rows(args.rows, skip=len(args.connections) * args.rows)
    result = await run_batch(url, rows, args.connections[0])
    stop.set()
    beside = await beside_task
    print(_line(f"batch, {args.connections[0]} connections, beside", result))
    served = sum(1 for status, _ in beside if status == 200)
    target = 3 * _median_s(alone) + 0.5
    held = _median_s(beside) <= target
    print(
        f"second client beside the batch: {served} of {len(beside)} served, median {_median_s(beside):.3f} s "
        f"(target <= 3 x {_median_s(alone):.3f} + 0.5 = {target:.3f} s: {'held' if held else 'MISSED'})"
    )
    return ok and result.answered == result.rows and alone_ok and served == len(beside) and held


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.batch_client", description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=("katago", "sim"), default="katago")
    parser.add_argument("--rows", type=int, default=2000, help="positions per run (default 2000)")
    parser.add_argument("--connections", type=int, nargs="+", default=[512, 1024], help="the runs alone")
    parser.add_argument("--probes", type=int, default=10, help="the second client's queries alone")
    args = parser.parse_args(argv)
    engine_words = "simulated engine" if args.engine == "sim" else "real CPU KataGo (Eigen), 4 analysis threads"
    print(machine_line(f"load generator included, loopback, {engine_words}"))
    print(f"engine {args.engine}; {args.rows} rows; kgserve on runtime/config.yaml's limits as shipped")
    with tempfile.TemporaryDirectory(prefix="batch-client-") as tmp:
        settings, env = shipped_settings(args.engine, Path(tmp))
        proc = _start(settings, env, Path(tmp))
        try:
            assert proc.url is not None
            ok = asyncio.run(_run(proc.url, args))
        finally:
            proc.stop(grace_s=5.0)
            refusals = [line for line in proc.lines() if "connection refused" in line]
            print(f"kgserve access lines of refused connections: {len(refusals)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
