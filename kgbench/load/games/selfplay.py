"""Self-play games by a real KataGo, for the traffic of game reviews: `python -m kgbench.load.games.selfplay`.

KataGo's analysis engine plays both sides: each move is one analysis query on the game so far at a few visits.
The opening is random (the first moves drawn from the network's raw policy at temperature 1, how KataGo's own
self-play starts its games), then the engine's most-visited move is played. A game ends after two passes in a
row, when the side to move resigns (its winrate below `--resign` for 5 of its turns in a row, from move 0.4 x
the board's points on), or at 1.25 x the board's points in moves. Games alternate Japanese rules (komi 6.5) and
Chinese rules (komi 7.5).

Each game is one SGF file, `OUT/<N>x<N>/selfplay-<N>-<k>.sgf`, its provenance in its root (AP, PB/PW: KataGo's
version, network and visits; GC: how it was played and the command). Games already there are skipped, so the
command can run in batches (`--time-limit`: start no game after that many seconds). The engine is the one
`KGBENCH_KATAGO_BIN` and `KGBENCH_KATAGO_MODEL` name, or `--binary`/`--model`.

    python -m kgbench.load.games.selfplay --size 19 --games 100 --visits 16 --parallel 4 --time-limit 480
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import math
import os
import random
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgserve.katago.sgf import COLUMNS, write_sgf
from kgserve.paths import PROJECT_ROOT

__all__ = ["GameSpec", "main", "play_games"]

DEFAULT_OUT = PROJECT_ROOT / "assets" / "analysis" / "games"
RULES = (("japanese", "Japanese", 6.5), ("chinese", "Chinese", 7.5))  # (KataGo's name, SGF RU, komi), by game parity
RESIGN_TURNS = 5
RESIGN_FROM = 0.4  # no resignation before this share of the board's points in moves (19x19: move 145)
_STREAM_LIMIT = 1 << 24  # a policy line of a 19x19 board is ~5 KB; room for any line


@dataclass(frozen=True)
class GameSpec:
    size: int
    index: int
    seed: int
    visits: int
    resign: float

    @property
    def name(self) -> str:
        return f"selfplay-{self.size}-{self.index:03d}"

    @property
    def rules(self) -> tuple[str, str, float]:
        return RULES[self.index % len(RULES)]

    def opening_moves(self, rng: random.Random) -> int:
        """How many moves are drawn from the raw policy: 4..12 on 19x19, scaled by the board's area."""
        scale = self.size * self.size / 361
        return rng.randint(max(1, round(4 * scale)), max(2, round(12 * scale)))


class Engine:
    """`katago analysis` as a subprocess: one query line in, its final line back (by id)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.counter = 0
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, binary: str, model: str, cfg: Path, log: Path) -> Engine:
        argv = [binary, "analysis", "-config", str(cfg), "-model", model]
        with log.open("ab") as err:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err, limit=_STREAM_LIMIT
            )
        return cls(proc)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            doc = json.loads(line)
            future = self.waiting.pop(str(doc.get("id")), None)
            if future is not None and not future.done():
                future.set_result(doc)
            elif "error" in doc and future is None:
                raise RuntimeError(f"the engine answered an error without an id: {doc}")
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(RuntimeError("the engine exited"))

    async def ask(self, body: dict[str, Any]) -> dict[str, Any]:
        self.counter += 1
        qid = f"q{self.counter}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[qid] = future
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"id": qid, **body}).encode() + b"\n")
        await self.proc.stdin.drain()
        doc = await future
        if "error" in doc:
            raise RuntimeError(f"the engine refused {body}: {doc['error']}")
        return doc

    async def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 60)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        await asyncio.gather(self.reader, return_exceptions=True)


def _vertex(index: int, size: int) -> str:
    """KataGo's policy index (row-major from the top left, pass last) -> GTP vertex."""
    return "pass" if index == size * size else f"{COLUMNS[index % size]}{size - index // size}"


def draw_from_policy(policy: Sequence[float], size: int, rng: random.Random) -> str:
    """A legal move (not pass) drawn in proportion to the raw policy (temperature 1; illegal points are -1)."""
    weights = [max(0.0, p) for p in policy[: size * size]]
    if sum(weights) <= 0:
        return "pass"
    return _vertex(rng.choices(range(size * size), weights=weights)[0], size)


async def play_game(engine: Engine, spec: GameSpec) -> tuple[list[tuple[str, str]], str]:
    """One self-play game: (moves, SGF result)."""
    rng = random.Random(f"{spec.seed}:{spec.size}:{spec.index}")
    rules, _, komi = spec.rules
    opening = spec.opening_moves(rng)
    limit = math.ceil(1.25 * spec.size * spec.size)
    moves: list[tuple[str, str]] = []
    low_turns = {"B": 0, "W": 0}
    result = ""
    while len(moves) < limit:
        colour = "B" if len(moves) % 2 == 0 else "W"
        doc = await engine.ask(
            {
                "moves": [list(m) for m in moves],
                "rules": rules,
                "komi": komi,
                "boardXSize": spec.size,
                "boardYSize": spec.size,
                "maxVisits": spec.visits,
                "includePolicy": len(moves) < opening,
            }
        )
        root = doc["rootInfo"]  # winrate and score of the side to move (reportAnalysisWinratesAs = SIDETOMOVE)
        low_turns[colour] = low_turns[colour] + 1 if root["winrate"] < spec.resign else 0
        if low_turns[colour] >= RESIGN_TURNS and len(moves) >= RESIGN_FROM * spec.size * spec.size:
            result = f"{'W' if colour == 'B' else 'B'}+R"
            break
        if len(moves) < opening:
            move = draw_from_policy(doc["policy"], spec.size, rng)
        else:
            move = min(doc["moveInfos"], key=lambda info: info["order"])["move"]
        moves.append((colour, move))
        if len(moves) >= 2 and moves[-1][1] == moves[-2][1] == "pass":
            lead = float(root["scoreLead"])  # the side that passed last, before its pass
            winner = colour if lead > 0 else ("W" if colour == "B" else "B")
            result = f"{winner}+{abs(lead):.1f}" if abs(lead) >= 0.05 else "0"
            break
    return moves, result


def _cfg(parallel: int) -> str:
    return "\n".join(
        [
            f"numAnalysisThreads = {parallel}",
            "numSearchThreadsPerAnalysisThread = 1",
            f"nnMaxBatchSize = {parallel}",
            "nnCacheSizePowerOfTwo = 20",
            "nnMutexPoolSizePowerOfTwo = 14",
            "reportAnalysisWinratesAs = SIDETOMOVE",
            "",
        ]
    )


async def play_games(
    specs: Sequence[GameSpec],
    out: Path,
    *,
    binary: str,
    model: str,
    parallel: int,
    time_limit_s: float,
    command: str,
) -> list[Path]:
    """Play the games whose files are missing, `parallel` at a time; start none after `time_limit_s`."""
    todo = [s for s in specs if not (out / f"{s.size}x{s.size}" / f"{s.name}.sgf").exists()]
    written: list[Path] = []
    if not todo:
        return written
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kgbench-selfplay-") as tmp:
        cfg = Path(tmp) / "selfplay.cfg"
        cfg.write_text(_cfg(parallel), encoding="utf-8")
        engine = await Engine.start(binary, model, cfg, Path(tmp) / "stderr.log")
        try:
            version = (await engine.ask({"action": "query_version"}))["version"]
            net = Path((await engine.ask({"action": "query_models"}))["models"][0]["name"]).name
            queue = list(todo)

            async def worker() -> None:
                while queue and time.monotonic() - started < time_limit_s:
                    spec = queue.pop(0)
                    moves, result = await play_game(engine, spec)
                    written.append(_save(out, spec, moves, result, version, net, command))
                    print(f"{spec.name}: {len(moves)} moves, {result or 'no result'}", flush=True)

            await asyncio.gather(*(worker() for _ in range(parallel)))
        finally:
            await engine.close()
    return written


def _save(
    out: Path, spec: GameSpec, moves: list[tuple[str, str]], result: str, version: str, net: str, command: str
) -> Path:
    _, ru, komi = spec.rules
    player = f"KataGo {version} ({net.removesuffix('.bin.gz')}, {spec.visits} visits)"
    props = {
        "GN": spec.name,
        "AP": "kgbench.load.games.selfplay:1",
        "DT": datetime.date.today().isoformat(),
        "PB": player,
        "PW": player,
        "RE": result,
        "GC": (
            f"Self-play by the real KataGo {version} analysis engine, network {net}, {spec.visits} visits a move, "
            "1 search thread. Opening: the first moves drawn from the raw policy at temperature 1 (seed "
            f"{spec.seed}:{spec.size}:{spec.index}), then the most-visited move. Ends after two passes (result: "
            f"KataGo's score lead), a resignation (winrate below {spec.resign:g} for {RESIGN_TURNS} turns in a row, "
            f"from move {RESIGN_FROM:g} x the board's points on) or 1.25 x the board's points in moves. "
            f"Made by: {command}"
        ),
    }
    path = out / f"{spec.size}x{spec.size}" / f"{spec.name}.sgf"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(write_sgf(spec.size, komi, ru, moves, props), encoding="utf-8")
    return path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m kgbench.load.games.selfplay", description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=19, help="board size (default 19)")
    p.add_argument("--games", type=int, default=100, help="games numbered 0..games-1 (default 100)")
    p.add_argument("--first", type=int, default=0, help="the first game's number (default 0)")
    p.add_argument("--visits", type=int, default=16, help="visits a move (default 16)")
    p.add_argument("--parallel", type=int, default=4, help="games played at once (analysis threads; default 4)")
    p.add_argument("--seed", type=int, default=0, help="the openings' seed (default 0)")
    p.add_argument("--resign", type=float, default=0.02, help="winrate below which a side resigns (default 0.02)")
    p.add_argument("--time-limit", type=float, default=math.inf, help="start no game after this many seconds")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder of the <N>x<N>/ game folders")
    p.add_argument("--binary", default=os.environ.get("KGBENCH_KATAGO_BIN"), help="KataGo (KGBENCH_KATAGO_BIN)")
    p.add_argument("--model", default=os.environ.get("KGBENCH_KATAGO_MODEL"), help="network (KGBENCH_KATAGO_MODEL)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.binary or not args.model:
        print("selfplay: a real KataGo is needed: set KGBENCH_KATAGO_BIN and KGBENCH_KATAGO_MODEL", file=sys.stderr)
        return 2
    if not 2 <= args.size <= 19 or args.games < 1 or args.visits < 1 or args.parallel < 1:
        print("selfplay: --size 2..19, --games, --visits and --parallel >= 1", file=sys.stderr)
        return 2
    specs = [GameSpec(args.size, k, args.seed, args.visits, args.resign) for k in range(args.first, args.games)]
    shown = ["--size", str(args.size), "--games", str(args.games), "--visits", str(args.visits)]
    shown += ["--seed", str(args.seed), "--resign", f"{args.resign:g}"]
    command = "python -m kgbench.load.games.selfplay " + shlex.join(shown)
    written = asyncio.run(
        play_games(
            specs,
            args.out,
            binary=args.binary,
            model=args.model,
            parallel=args.parallel,
            time_limit_s=args.time_limit,
            command=command,
        )
    )
    left = sum(1 for s in specs if not (args.out / f"{s.size}x{s.size}" / f"{s.name}.sgf").exists())
    print(f"selfplay: {len(written)} game(s) written to {args.out}; {left} of {len(specs)} still to play")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
