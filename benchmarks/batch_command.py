"""`python -m benchmarks.batch_command [--engine sim|real] [--rows N] [--visits V] [--kills 5] [--out DIR]`: what
`python -m kgserve.batch` costs and what it survives (issue 41, docs/batch.md).

The same N queries (positions of the repository's 9x9 self-play records, `--visits` each) go:
1. `pipe`: straight into the engine's own stdin (`katago analysis`, or the sim), every line written at once, timed
   from the first line written to the last final line read: the most an engine of this cfg gives.
2. `command (pool)`: `python -m kgserve.batch --config` (the same engine, cfg and net, in the command's pool).
3. `command (url)`: `python -m kgserve.batch --url` against a kgserve of that config.
4. `hand client`: a hand-written client as `hawkoli1987/KataGo`'s runtime/analyze_offline.py is: every query in
   memory, 512 connections from one process, 3 tries 1 s and 2 s apart (no Retry-After), `{}` for a failed row,
   the output written at the end.
The command's rows/s is its own summary's (after its target is ready, as the pipe's clock starts at ready).
Then `--kills` SIGKILLs of the command (URL target) at random moments, each followed by a rerun until one finishes,
and a run during which kgserve is restarted: every id exactly once, answers of the same shape as an uninterrupted
run's (id, keys, turn).

`--engine real` needs KGBENCH_KATAGO_BIN and KGBENCH_KATAGO_MODEL (the CPU KataGo, docs/real-katago.md); `sim` is
the simulated engine at real time (always labelled simulated). Figures go to stdout and OUT/batch-<engine>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from kgbench.targets.kgserve_process import KgserveProcess
from kgserve.batch.inputs import PositionSpec, QuerySettings, SgfSource, rows
from kgserve.engine.pool import engine_argv
from kgserve.katago.protocol import READY_LINE
from kgserve.paths import PROJECT_ROOT
from kgserve.settings import load_settings

GAMES = PROJECT_ROOT / "assets" / "analysis" / "games" / "9x9"
CPU_CFG = {"numAnalysisThreads": 4, "numSearchThreadsPerAnalysisThread": 1, "nnMaxBatchSize": 8,
           "numNNServerThreadsPerModel": 1, "nnCacheSizePowerOfTwo": 18, "maxVisits": 500}  # fmt: skip
RATE = re.compile(r"\(([\d.]+) rows/s\)")


def write_config(out: Path, engine: str) -> Path:
    """runtime/config.yaml for this benchmark: the engine (real: eigen with the CPU KataGo; sim), a cfg of
    CPU_CFG, one process, kgserve's limits as shipped."""
    raw = load_settings(PROJECT_ROOT / "runtime" / "config.yaml").model_dump(mode="json", exclude_none=True)
    cfg = out / "batch.cfg"
    cfg.write_text("".join(f"{key} = {value}\n" for key, value in CPU_CFG.items()), encoding="utf-8")
    raw["engine"].update(cfg=str(cfg), processes=1, min_ready=None)
    raw["server"]["grace_period_s"] = 1
    if engine == "real":
        binary, model = os.environ.get("KGBENCH_KATAGO_BIN"), os.environ.get("KGBENCH_KATAGO_MODEL")
        if not binary or not model:
            raise SystemExit("--engine real: set KGBENCH_KATAGO_BIN and KGBENCH_KATAGO_MODEL (docs/real-katago.md)")
        raw["engine"].update(backend="eigen", model=model)
        raw["engine"]["backends"]["eigen"] = {"command": [binary], "startup_timeout_s": 300}
    else:
        raw["engine"]["backend"] = "sim"
    path = out / "config.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def write_queries(out: Path, count: int, visits: int) -> Path:
    source = SgfSource([GAMES], PositionSpec.parse("all"))
    path = out / "queries.jsonl"
    with path.open("wb") as sink:
        for row in rows(source, QuerySettings(visits=visits)):
            if row.index >= count:
                break
            sink.write((row.line or b"") + b"\n")
    return path


def pipe_rate(config: Path, queries: Path) -> float:
    """rows/s of the engine's own stdin: every line written at once from a thread, final lines counted."""
    settings = load_settings(config)
    lines = queries.read_bytes().splitlines(keepends=True)
    proc = subprocess.Popen(engine_argv(settings), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=config.parent)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    ready = threading.Event()

    def drain_stderr() -> None:
        for line in proc.stderr:  # type: ignore[union-attr]
            if READY_LINE.encode() in line:
                ready.set()

    threading.Thread(target=drain_stderr, daemon=True).start()
    if not ready.wait(300):
        proc.kill()
        raise SystemExit("the engine did not start within 300 s")
    started = time.monotonic()

    def write() -> None:
        for line in lines:
            proc.stdin.write(line)  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    threading.Thread(target=write, daemon=True).start()
    finals = 0
    while finals < len(lines):
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("the engine closed its stdout before answering every query")
        finals += b'"isDuringSearch":false' in line or line.startswith(b'{"error"')
    elapsed = time.monotonic() - started
    proc.stdin.close()
    proc.wait(60)
    return len(lines) / elapsed


def command(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "kgserve.batch", *map(str, args)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600, check=False)


def command_rate(done: subprocess.CompletedProcess[str]) -> float:
    match = RATE.search(done.stderr)
    if done.returncode != 0 or match is None:
        raise SystemExit(f"the command failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return float(match.group(1))


async def hand_client(url: str, lines: list[bytes], connections: int = 512) -> tuple[float, list[str]]:
    """analyze_offline.py's way: (seconds, the rows, {} where it failed), written by the caller at the end."""
    results: list[str] = ["{}"] * len(lines)
    started = time.monotonic()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=connections)) as session:

        async def one(index: int) -> None:
            for attempt in range(3):
                try:
                    async with session.post(url + "/analysis", data=lines[index]) as resp:
                        if resp.status == 200:
                            body = await resp.text()
                            finals = [ln for ln in body.splitlines() if '"isDuringSearch":false' in ln]
                            if finals:
                                results[index] = finals[-1]
                                return
                except aiohttp.ClientError:
                    pass
                if attempt < 2:
                    await asyncio.sleep(attempt + 1.0)

        await asyncio.gather(*(one(i) for i in range(len(lines))))
    return time.monotonic() - started, results


def _shapes(path: Path) -> list[tuple[Any, ...]]:
    answers = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [(a.get("id"), tuple(sorted(a)), a.get("turnNumber")) for a in answers]


def _journalled(output: Path) -> int:
    try:
        return max(0, output.with_name(output.name + ".partial.jsonl").read_bytes().count(b"\n") - 1)
    except FileNotFoundError:
        return 0


def kills(url: str, queries: Path, out: Path, env: dict[str, str], reference: Path, count: int,
          total: int) -> dict[str, Any]:  # fmt: skip
    """`count` SIGKILLs at random moments (a random number of the rows left journalled, the first possibly before
    the journal exists), then a rerun to the end."""
    output = out / "killed.jsonl"
    output.unlink(missing_ok=True)
    output.with_name(output.name + ".partial.jsonl").unlink(missing_ok=True)
    argv = [sys.executable, "-m", "kgserve.batch", str(queries), "-o", str(output), "--url", url]
    landed: list[int] = []
    for left in range(count, 0, -1):
        done = _journalled(output)
        at = done + random.randint(0, max(1, (total - done) // (left + 1)))
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while proc.poll() is None and _journalled(output) < at:
            time.sleep(0.01)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            landed.append(_journalled(output))
        proc.wait(60)
    rerun = command(queries, "-o", output, "--url", url, env=env)
    shapes = _shapes(output) if rerun.returncode == 0 else []
    ids_once = len({shape[0] for shape in shapes}) == len(shapes)
    return {"kills": len(landed), "journalled_at_kills": landed, "rerun_rc": rerun.returncode,
            "identical_shape": shapes == _shapes(reference), "ids_once": ids_once}  # fmt: skip


def restart(config: Path, queries: Path, out: Path, env: dict[str, str], reference: Path,
            total: int) -> dict[str, Any]:  # fmt: skip
    """A run during which kgserve is stopped (SIGTERM) and started again on the same port."""
    first = KgserveProcess(config, out / "kgserve-restart-1.log", env)
    first.start()
    url = first.wait_listening(300)
    first.wait_ready(300)
    output = out / "restarted.jsonl"
    argv = [sys.executable, "-m", "kgserve.batch", str(queries), "-o", str(output), "--url", url, "--restart"]
    with (out / "restarted.log").open("w") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=log)
        at = random.randint(total // 5, (3 * total) // 5)  # a random moment of its middle
        while proc.poll() is None and _journalled(output) < at:
            time.sleep(0.01)
        first.stop()
        second = KgserveProcess(config, out / "kgserve-restart-2.log", env, args=["--port", url.rsplit(":", 1)[1]])
        second.start()
        try:
            code = proc.wait(3600)
        finally:
            second.stop()
    same = code == 0 and _shapes(output) == _shapes(reference)
    return {
        "rc": code,
        "restarted_at": at,
        "identical_shape": same,
        "summary": (out / "restarted.log").read_text().strip()[-400:],
    }


def pairs(config: Path, queries: Path, out: Path, env: dict[str, str], figures: dict[str, Any], count: int) -> int:
    """The pipe and the command's pool alternated `count` times (on busy cores, one pair's order would bias it)."""
    figures["pipe_rows_s"], figures["pool_rows_s"] = [], []
    for _ in range(count):
        figures["pipe_rows_s"].append(pipe_rate(config, queries))
        run = command(queries, "-o", out / "pool.jsonl", "--config", config, "--restart", env=env)
        figures["pool_rows_s"].append(command_rate(run))
    ratios = [pool / pipe for pipe, pool in zip(figures["pipe_rows_s"], figures["pool_rows_s"], strict=True)]
    figures["pool_over_pipe"] = ratios
    figures["load_after"] = os.getloadavg()
    print(json.dumps({k: v for k, v in figures.items() if k != "cfg"}, indent=1, default=str))
    (out / f"pairs-{figures['engine']}.json").write_text(json.dumps(figures, indent=1, default=str), encoding="utf-8")
    return 0


@contextlib.contextmanager
def serving(config: Path, env: dict[str, str], log: Path) -> Iterator[str]:
    server = KgserveProcess(config, log, env)
    server.start()
    try:
        url = server.wait_listening(300)
        server.wait_ready(300)
        yield url
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.batch_command", description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=("sim", "real"), default="sim")
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--visits", type=int, default=16)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("outputs/batch_command"))
    parser.add_argument("--pairs", type=int, default=0, help="only pipe and pool, alternated this many times (A/B)")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    config = write_config(out, args.engine)
    queries = write_queries(out, args.rows, args.visits)
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    if args.engine == "sim":
        env.update(KGSERVE_SIM_SPEED="1", KGSERVE_SIM_DEVICE="private", KGSERVE_SIM_PROFILE="cpu-eigen-b6c96")
        os.environ.update({k: env[k] for k in ("KGSERVE_SIM_SPEED", "KGSERVE_SIM_DEVICE", "KGSERVE_SIM_PROFILE")})
    figures: dict[str, Any] = {"engine": args.engine, "rows": args.rows, "visits": args.visits, "cfg": CPU_CFG,
                               "load_before": os.getloadavg()}  # fmt: skip
    if args.pairs:
        return pairs(config, queries, out, env, figures, args.pairs)
    figures["pipe_rows_s"] = pipe_rate(config, queries)
    pool = command(queries, "-o", out / "pool.jsonl", "--config", config, "--restart", env=env)
    figures["pool_rows_s"] = command_rate(pool)
    # a fresh kgserve for each measured client: the engine's NN cache must not carry one run's positions to the next
    reference = out / "url.jsonl"
    with serving(config, env, out / "kgserve-url.log") as url:
        figures["url_rows_s"] = command_rate(command(queries, "-o", reference, "--url", url, "--restart", env=env))
    with serving(config, env, out / "kgserve-hand.log") as url:
        hand_s, hand = asyncio.run(hand_client(url, queries.read_bytes().splitlines()))
    (out / "hand.jsonl").write_text("\n".join(hand) + "\n", encoding="utf-8")
    figures["hand_empty_rows"] = hand.count("{}")
    figures["hand_rows_s"] = len(hand) / hand_s  # {} rows counted, as its author would
    figures["hand_answered_rows_s"] = (len(hand) - figures["hand_empty_rows"]) / hand_s
    with serving(config, env, out / "kgserve-kills.log") as url:
        figures["kills"] = kills(url, queries, out, env, reference, args.kills, args.rows)
    figures["restart"] = restart(config, queries, out, env, reference, args.rows)
    figures["load_after"] = os.getloadavg()
    label = "simulated engine (sim, profile cpu-eigen-b6c96)" if args.engine == "sim" else "real KataGo (CPU)"
    print(f"| {label} | {args.rows} rows x {args.visits} visits | pipe {figures['pipe_rows_s']:.2f} | "
          f"pool {figures['pool_rows_s']:.2f} ({figures['pool_rows_s'] / figures['pipe_rows_s']:.2f}) | "
          f"url {figures['url_rows_s']:.2f} ({figures['url_rows_s'] / figures['pipe_rows_s']:.2f}) | "
          f"hand {figures['hand_rows_s']:.2f} ({figures['hand_answered_rows_s']:.2f} answered), "
          f"{figures['hand_empty_rows']} x {{}} |")  # fmt: skip
    print(json.dumps({k: v for k, v in figures.items() if k != "cfg"}, indent=1, default=str))
    (out / f"batch-{args.engine}.json").write_text(json.dumps(figures, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
