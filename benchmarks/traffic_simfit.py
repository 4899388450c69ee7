"""`python -m benchmarks.traffic_simfit --parent P --concurrent C [--kind review|positions] [--pows=-1,8,23]`: the
simulated engine's NN rows per visit with the cache model's shares set to P and C (kgserve/sim/model/nncache.py),
for fitting them to the real CPU KataGo's rounds (docs/traffic.md, "The sim against the real engine").

The sim process runs as kgbench runs it for issue 35's rounds (the cpu-eigen-b6c96 profile, 4 analysis threads x 1,
16 visits a turn) but fast (KGSERVE_SIM_SPEED 20) and without kgserve: `review` sends the first four 19x19 games of
assets/analysis/games as whole-game analyzeTurns requests at once (the engine takes their turns in order, four at
a time); `positions` steps through the first game one position a request, the next sent when the last is
answered. It prints the engine's `NN rows` at exit over the visits answered. These are the model's outputs, not
measurements: the real engine's figures come from `python -m benchmarks.traffic`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kgbench.load.games.library import GAMES_DIR, game_files
from kgserve.katago.sgf import SgfGame, parse_sgf
from kgserve.paths import PROJECT_ROOT as REPO

__all__ = ["main", "rows_per_visit"]

CFG = REPO / "tests" / "data" / "katago-reference" / "analysis.cfg"  # real KataGo's analysis example cfg
MODEL = REPO / "assets" / "sim" / "kgsim-b40c768.bin.gz"  # the file the simulated engine loads as its net
VISITS = 16
# run kgserve.sim with the cache model's default shares replaced (the sim reads them from NNCacheModel's defaults)
_WRAPPER = (
    "import sys, runpy, kgserve.sim.model.nncache as m; "
    "m.NNCacheModel.__init__.__defaults__ = (m.CacheShares(parent={p}, child={p}, concurrent={c}),); "
    "sys.argv = ['kgserve.sim', *sys.argv[1:]]; runpy.run_module('kgserve.sim', run_name='__main__')"
)


def _query(qid: str, game: SgfGame, turns: list[int]) -> str:
    return json.dumps({
        "id": qid, "moves": [list(m) for m in game.moves], "rules": "chinese", "komi": 7.5,
        "boardXSize": game.size, "boardYSize": game.size, "maxVisits": VISITS, "analyzeTurns": turns,
    })  # fmt: skip


def _cfg(folder: Path, cache_pow: int) -> Path:
    keys = {"numAnalysisThreads": 4, "numSearchThreadsPerAnalysisThread": 1, "nnCacheSizePowerOfTwo": cache_pow}
    lines = [line for line in CFG.read_text().splitlines() if line.split("=")[0].strip() not in keys]
    path = folder / f"analysis-{cache_pow}.cfg"
    path.write_text("\n".join([*lines, *(f"{k} = {v}" for k, v in keys.items())]) + "\n")
    return path


def rows_per_visit(parent: float, concurrent: float, kind: str, cache_pow: int, folder: Path) -> float:
    """The sim's NN rows per visit for one `kind` run at table size 2^cache_pow."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KGSERVE_SIM_")}
    env.update(KGSERVE_SIM_SPEED="20", KGSERVE_SIM_DEVICE="private",
               KGSERVE_SIM_PROFILE="cpu-eigen-b6c96", KGSERVE_SIM_STARTUP_S="0.01")  # fmt: skip
    argv = [sys.executable, "-c", _WRAPPER.format(p=parent, c=concurrent), "analysis", "-config",
            str(_cfg(folder, cache_pow)), "-model", str(MODEL)]  # fmt: skip
    games = [parse_sgf(path.read_text(encoding="utf-8")) for path in game_files(GAMES_DIR, [19])[:4]]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    visits = 0

    def answered(count: int) -> None:
        nonlocal visits
        while count:
            line = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
            if line.get("isDuringSearch") is False:
                visits += int(line["rootInfo"]["visits"])
                count -= 1

    try:
        if kind == "review":
            for i, game in enumerate(games):
                proc.stdin.write((_query(f"g{i}", game, list(range(len(game.moves) + 1))) + "\n").encode())
            proc.stdin.flush()
            answered(sum(len(game.moves) + 1 for game in games))
        else:
            for turn in range(len(games[0].moves) + 1):
                proc.stdin.write((_query(f"t{turn}", games[0], [turn]) + "\n").encode())
                proc.stdin.flush()
                answered(1)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    rows = int(next(line for line in err.decode().splitlines() if "NN rows: " in line).split("NN rows: ")[1])
    return rows / max(1, visits)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.traffic_simfit", description=__doc__.split("\n\n")[0])
    p.add_argument("--parent", type=float, required=True)
    p.add_argument("--concurrent", type=float, required=True)
    p.add_argument("--kind", choices=["review", "positions"], default="review")
    p.add_argument(
        "--pows",
        default="-1,4,6,8,10,12,16,23",
        help="nnCacheSizePowerOfTwo values, comma-separated (--pows=-1,23: an = before a leading minus)",
    )
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kgbench-simfit-") as tmp:
        for cache_pow in (int(v) for v in args.pows.split(",")):
            value = rows_per_visit(args.parent, args.concurrent, args.kind, cache_pow, Path(tmp))
            print(f"{args.kind} parent {args.parent} concurrent {args.concurrent} "
                  f"nnCacheSizePowerOfTwo {cache_pow}: NN rows per visit {value:.3f}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
