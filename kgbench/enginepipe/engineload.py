"""Closed-loop load straight into one analysis-engine process over its stdin pipe (no kgserve, no HTTP).

Used by the throughput calibration (``benchmarks.calibration``) to hold a real KataGo and the simulated engine
to exactly the same load: ``queries`` queries of ``visits`` visits from the same seeded position stream, at most
``concurrency`` outstanding. Needs only the standard library, psutil and ``kgbench.load.traffic``, so it also runs
on a bare GPU host.

Throughput excludes a warm-up: the first ``concurrency`` answers (the pipeline filling, first NN evaluations
and memory allocation) and the time they took; ``req_per_s`` = answers after the warm-up / time from the
warm-up's last answer to the last answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import psutil

from kgbench.load.traffic import QuerySource, load_games
from kgserve.katago.protocol import READY_LINE

__all__ = ["EngineLoadResult", "nineteen_by_nineteen", "run_engine_load", "run_engine_load_sync"]

_NN_STAT = re.compile(r"NN (rows|batches): (\d+)\s*$")


class _Counts(NamedTuple):
    req_per_s: float
    answered: int
    errors: int
    measured: int
    measure_s: float
    cpu_s: float
    measured_until: float  # time.monotonic() of the last answer: the measured span is the measure_s before it


@dataclass(frozen=True)
class EngineLoadResult:
    req_per_s: float
    answered: int
    errors: int
    measured: int  # answers counted in req_per_s (after the warm-up)
    measure_s: float
    startup_s: float  # process start to the ready line
    cpu_s: float  # the engine's CPU seconds (user + system, all threads) over the measured span
    measured_until: float = 0.0  # time.monotonic() of the last answer (the span is the measure_s before it)
    nn_avg_batch: float = 0.0  # NN rows / NN batches from the engine's exit log, whole run (0: not logged)
    nn_rows: float = 0.0  # NN evaluations over the whole run, warm-up included (the exit log; 0: not logged)

    @property
    def cpu_per_query(self) -> float:
        return self.cpu_s / max(1, self.measured)

    @property
    def cores_used(self) -> float:
        """Average cores the engine got while measured: on a shared machine, less than it could use."""
        return self.cpu_s / max(self.measure_s, 1e-9)


def nineteen_by_nineteen(seed: int) -> QuerySource:
    """The position stream used for calibration: the 19x19 sample games, every prefix, symmetry and komi."""
    games = [g for g in load_games() if g.size == 19]
    return QuerySource(games, seed=seed)


async def _wait_ready(stderr: asyncio.StreamReader, tail: list[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"engine not ready after {timeout_s:.0f} s; stderr tail: {tail[-5:]}")
        line = await asyncio.wait_for(stderr.readline(), left)
        if not line:
            raise RuntimeError(f"engine exited before it was ready; stderr tail: {tail[-5:]}")
        text = line.decode(errors="replace").rstrip()
        tail.append(text)
        if READY_LINE in text:
            return


async def _drain(stream: asyncio.StreamReader, tail: list[str]) -> None:
    # keeps the engine's stderr pipe from filling while it logs during the run
    while line := await stream.readline():
        tail.append(line.decode(errors="replace").rstrip())
        del tail[:-50]


async def run_engine_load(
    argv: Sequence[str],
    source: QuerySource,
    *,
    visits: int,
    queries: int,
    concurrency: int,
    env: Mapping[str, str] | None = None,
    extra: Mapping[str, object] | None = None,
    startup_timeout_s: float = 120.0,
    run_timeout_s: float = 600.0,
) -> EngineLoadResult:
    """Start ``argv`` (an analysis engine), send ``queries`` queries keeping ``concurrency`` in flight, stop it.

    ``extra``: query keys added to every query (e.g. includePolicy / includeOwnership for a bulk extraction load)."""
    if queries <= concurrency:
        raise ValueError(f"queries ({queries}) must exceed concurrency ({concurrency}): the first are warm-up")
    if concurrency < 1 or visits < 1:
        raise ValueError("concurrency and visits must be >= 1")
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env) if env is not None else None,
        limit=1 << 24,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    tail: list[str] = []
    try:
        await _wait_ready(proc.stderr, tail, startup_timeout_s)
        startup_s = time.monotonic() - started
        drain = asyncio.create_task(_drain(proc.stderr, tail))
        counts = await asyncio.wait_for(
            _closed_loop(
                proc.stdin, proc.stdout, psutil.Process(proc.pid), source, visits, queries, concurrency, extra or {}
            ),
            run_timeout_s,
        )
        await _stop(proc)
        # the engine logs its NN statistics as it exits: read stderr to its end
        await asyncio.wait_for(drain, 10)
        rows, batches = _nn_stats(tail)
        return EngineLoadResult(
            startup_s=startup_s, nn_avg_batch=rows / batches if batches else 0.0, nn_rows=rows, **counts._asdict()
        )
    finally:
        await _stop(proc)


async def _closed_loop(
    stdin: asyncio.StreamWriter,
    stdout: asyncio.StreamReader,
    engine: psutil.Process,
    source: QuerySource,
    visits: int,
    queries: int,
    concurrency: int,
    extra: Mapping[str, object],
) -> _Counts:
    sent = answered = errors = 0
    warm_at = warm_cpu = 0.0

    def send_one() -> None:
        nonlocal sent
        _, body = source.next()
        body = {**body, **extra, "id": f"q{sent}", "maxVisits": visits, "analyzeTurns": [len(body.get("moves", []))]}
        stdin.write((json.dumps(body) + "\n").encode())
        sent += 1

    for _ in range(concurrency):
        send_one()
    await stdin.drain()
    while answered < queries:
        line = await stdout.readline()
        if not line:
            raise RuntimeError(f"engine closed stdout after {answered} of {queries} answers")
        message = json.loads(line)
        if message.get("isDuringSearch"):
            continue
        answered += 1
        if "error" in message:
            errors += 1
        if answered == concurrency:
            warm_at, warm_cpu = time.monotonic(), _cpu_seconds(engine)
        if sent < queries:
            send_one()
            await stdin.drain()
    end, end_cpu = time.monotonic(), _cpu_seconds(engine)
    measured = answered - concurrency
    span = max(end - warm_at, 1e-9)
    return _Counts(measured / span, answered, errors, measured, span, end_cpu - warm_cpu, end)


def _nn_stats(stderr_tail: list[str]) -> tuple[float, float]:
    """(NN rows, NN batches) from the engine's exit log; (0, 0) when it printed none."""
    found: dict[str, str] = {}
    for line in stderr_tail:
        if m := _NN_STAT.search(line):
            found[m.group(1)] = m.group(2)
    return float(found.get("rows", 0)), float(found.get("batches", 0))


def _cpu_seconds(engine: psutil.Process) -> float:
    times = engine.cpu_times()
    return float(times.user + times.system)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    # closing stdin is the engine's normal end; a kill only if it does not exit soon after
    if proc.returncode is None and proc.stdin is not None:
        proc.stdin.close()
    try:
        await asyncio.wait_for(proc.wait(), 10)
    except TimeoutError:
        proc.kill()
        await proc.wait()


def run_engine_load_sync(argv: Sequence[str], source: QuerySource, **kwargs: object) -> EngineLoadResult:
    return asyncio.run(run_engine_load(argv, source, **kwargs))  # type: ignore[arg-type]


def _main() -> None:
    """python -m kgbench.enginepipe.engineload CONFIG MODEL VISITS QUERIES CONCURRENCY [BIN]: one point, as JSON"""
    if len(sys.argv) not in (6, 7) or (len(sys.argv) == 6 and not os.environ.get("KGBENCH_KATAGO_BIN")):
        raise SystemExit(f"usage: {_main.__doc__} (BIN defaults to $KGBENCH_KATAGO_BIN)")
    cfg, model, visits, queries, concurrency = sys.argv[1:6]
    binary = sys.argv[6] if len(sys.argv) > 6 else os.environ["KGBENCH_KATAGO_BIN"]
    argv = [binary, "analysis", "-config", cfg, "-model", model]
    result = run_engine_load_sync(
        argv, nineteen_by_nineteen(0), visits=int(visits), queries=int(queries), concurrency=int(concurrency)
    )
    print(json.dumps({**result.__dict__, "cpu_per_query": result.cpu_per_query}))


if __name__ == "__main__":
    _main()
