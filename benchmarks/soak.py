"""Soak and chaos: many requests with colliding ids, client disconnects and engine SIGKILLs against a real kgserve.

``python -m benchmarks.soak --requests 10000 --disconnect-share 0.05 --kills 3 --processes 2``

kgserve runs as a subprocess (``python -m kgserve``, sim engine, loopback). Request i uses caller id
``c{i % ids}`` (so many requests in flight share an id), the first ``turn`` moves of the late-game sample and a
request-specific ``maxVisits``; its answer must carry exactly that id, that ``turnNumber`` and that many root visits,
otherwise it counts as cross-delivered. A share of the clients hangs up after a few ms (by design, not counted as a
failure). Engines are SIGKILLed at evenly spaced points of the run. Every request ends as exactly one of:
completed, failed (kgserve answered with an error status: by kind), disconnected (by the client, on purpose),
lost (no complete answer: client timeout, cut stream, 200 without the final line) — plus cross-delivered.
The whole run is bounded by ``--max-seconds`` (requests not sent by then are reported as not sent).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from benchmarks.common import rss_mb, run_on_sim
from kgbench.load.traffic import load_games
from kgbench.targets.kgserve_process import engine_pids, kgserve_running
from kgbench.targets.sim import sim_env, sim_settings
from kgbench.track.machine import machine_line


@dataclass
class SoakCounts:
    sent: int = 0
    not_sent: int = 0
    completed: int = 0
    disconnected: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    lost: Counter[str] = field(default_factory=Counter)
    cross_delivered: int = 0
    kills: list[int] = field(default_factory=list)  # pids killed
    samples: dict[str, str] = field(default_factory=dict)  # first response body per failure kind

    @property
    def answered(self) -> int:
        return self.completed + sum(self.failed.values())


def expected_request(i: int, moves: list[list[str]], ids: int) -> tuple[str, int, int]:
    """(caller id, turn, visits) of request i: ids collide, (turn, visits) tells the answers apart."""
    return f"c{i % ids}", (i * 7) % (len(moves) + 1), 5 + (i % 53)


def check_answer(body: bytes, caller_id: str, turn: int, visits: int) -> str:
    """'ok' | 'cross' (a line for another request) | 'truncated' (no final line)."""
    final = None
    for raw in body.split(b"\n"):
        if not raw.strip():
            continue
        doc = json.loads(raw)
        if doc.get("id") != caller_id:
            return "cross"
        if doc.get("isDuringSearch") is False:
            final = doc
    if final is None:
        return "truncated"
    root = final.get("rootInfo") or {}
    if final.get("turnNumber") != turn or root.get("visits") != visits:
        return "cross"
    return "ok"


def failure_kind(status: int, body: bytes) -> str:
    """``http_<status>``, for 503 with why: the engine died under the query, or no engine was ready to take it."""
    if status != 503:
        return f"http_{status}"
    text = body.decode("utf-8", "replace").lower()
    if "could not submit" in text or "unavailable" in text or "not ready" in text:
        return "http_503 no engine ready"
    if "died" in text:
        return "http_503 engine died mid-query"
    return "http_503"


async def send_one(
    session: aiohttp.ClientSession,
    url: str,
    i: int,
    base: dict[str, Any],
    moves: list[list[str]],
    args: argparse.Namespace,
    hang_up_after: float | None,
    counts: SoakCounts,
) -> None:
    caller_id, turn, visits = expected_request(i, moves, args.ids)
    query = {**base, "id": caller_id, "moves": moves[:turn], "maxVisits": visits}
    data = json.dumps(query).encode()

    async def post() -> tuple[int, bytes]:
        async with session.post(url, data=data, headers={"Content-Type": "application/json"}) as resp:
            return resp.status, await resp.read()

    counts.sent += 1
    try:
        if hang_up_after is not None:
            try:
                status, body = await asyncio.wait_for(post(), hang_up_after)
            except TimeoutError:
                counts.disconnected += 1
                return
        else:
            status, body = await asyncio.wait_for(post(), args.request_timeout)
    except TimeoutError:
        counts.lost["timeout"] += 1
        return
    except aiohttp.ClientPayloadError:
        counts.lost["cut_stream"] += 1
        return
    except aiohttp.ClientError as exc:
        counts.failed["connection:" + type(exc).__name__] += 1
        return
    if status != 200:
        kind = failure_kind(status, body)
        counts.failed[kind] += 1
        counts.samples.setdefault(kind, body[:200].decode("utf-8", "replace"))
        return
    verdict = check_answer(body, caller_id, turn, visits)
    if verdict == "ok":
        counts.completed += 1
    elif verdict == "cross":
        counts.cross_delivered += 1
    else:
        counts.lost["no_final_line"] += 1


async def _killer(proc: Any, counts: SoakCounts, args: argparse.Namespace, done: asyncio.Event) -> None:
    """SIGKILL an engine each time another 1/(kills+1) of the requests was answered."""
    for k in range(args.kills):
        threshold = args.requests * (k + 1) // (args.kills + 1)
        while counts.answered + counts.disconnected < threshold and not done.is_set():  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        if done.is_set():
            return
        pids = await asyncio.to_thread(engine_pids, proc, True)
        while len(pids) < args.processes and not done.is_set():  # an engine is still restarting from the last kill
            await asyncio.sleep(0.1)
            pids = await asyncio.to_thread(engine_pids, proc, True)
        if pids:
            pid = pids[k % len(pids)]
            os.kill(pid, signal.SIGKILL)
            counts.kills.append(pid)


async def send_requests(url: str, args: argparse.Namespace, counts: SoakCounts, deadline: float) -> None:
    """args.requests requests to `url` (.../analysis), args.concurrency at a time, none sent after `deadline`."""
    game = next(g for g in load_games() if g.name == "lategame_19x19")
    moves = [list(m) for m in game.moves]
    base = {k: v for k, v in game.base.items() if k not in ("includePVVisits",)}
    rng = random.Random(args.seed)
    connector = aiohttp.TCPConnector(limit=args.concurrency + 8)
    async with aiohttp.ClientSession(connector=connector) as session:
        sem = asyncio.Semaphore(args.concurrency)
        tasks: set[asyncio.Task[None]] = set()
        for i in range(args.requests):
            await sem.acquire()
            if time.monotonic() > deadline:
                sem.release()
                counts.not_sent = args.requests - i
                break
            hang = rng.uniform(0.002, 0.05) if rng.random() < args.disconnect_share else None
            task = asyncio.create_task(send_one(session, url, i, base, moves, args, hang, counts))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            task.add_done_callback(lambda _t: sem.release())
        if tasks:
            await asyncio.wait(tasks)


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    settings = sim_settings(args.processes, min_ready=args.min_ready)
    env = sim_env(args.engine_rps, device=f"soak{os.getpid()}")
    counts = SoakCounts()
    started = time.monotonic()
    with kgserve_running(settings, env) as proc:
        assert proc.url is not None and proc.proc is not None
        kg_pid = proc.proc.pid
        pids0 = engine_pids(proc)
        rss_start = {"kgserve": rss_mb(kg_pid), "engines": [rss_mb(p) for p in pids0]}
        done = asyncio.Event()
        killer = asyncio.create_task(_killer(proc, counts, args, done))
        await send_requests(proc.url + "/analysis", args, counts, started + args.max_seconds)
        done.set()
        await killer
        elapsed = time.monotonic() - started
        settle = time.monotonic()
        while time.monotonic() - settle < 15.0:  # let the last restart settle before reading RSS
            if len(engine_pids(proc, True)) == args.processes:
                break
            await asyncio.sleep(0.1)
        settled_s = time.monotonic() - settle
        pids1 = engine_pids(proc)
        rss_end = {"kgserve": rss_mb(kg_pid), "engines": [rss_mb(p) for p in pids1]}
        _, ready = proc.get_json("/readyz")
    return {
        "counts": counts,
        "elapsed_s": elapsed,
        "settled_s": settled_s,
        "rss_start": rss_start,
        "rss_end": rss_end,
        "restarts": [e.get("restarts") for e in ready.get("engines") or []],
        "ready_at_end": bool(ready.get("ready")) and all(e.get("state") == "ready" for e in ready.get("engines") or []),
        "unaccounted": unaccounted(counts),
    }


def _mb(values: Any) -> str:
    if isinstance(values, list):
        return " / ".join(_mb(v) for v in values) or "-"
    return "-" if values is None else f"{values:.0f} MB"


def unaccounted(c: SoakCounts) -> int:
    """Requests sent that ended as none of the outcomes (must be 0)."""
    lost = sum(c.lost.values())
    return c.sent - (c.completed + sum(c.failed.values()) + c.disconnected + lost + c.cross_delivered)


def count_rows(c: SoakCounts) -> list[tuple[str, str]]:
    """The outcome rows of a soak table."""
    failed = ", ".join(f"{k}: {v}" for k, v in sorted(c.failed.items())) or "none"
    lost = sum(c.lost.values())
    lost_kinds = f" ({', '.join(f'{k}: {v}' for k, v in sorted(c.lost.items()))})" if lost else ""
    return [
        ("requests sent", f"{c.sent}" + (f" ({c.not_sent} not sent: time bound)" if c.not_sent else "")),
        ("completed (right id, turn and visits)", f"{c.completed}"),
        ("failed, by kind", f"{sum(c.failed.values())} ({failed})"),
        ("disconnected by the client (on purpose)", f"{c.disconnected}"),
        ("lost", f"{lost}{lost_kinds}"),
        ("cross-delivered", f"{c.cross_delivered}"),
        ("unaccounted", f"{unaccounted(c)}"),
    ]


def render(report: dict[str, Any], args: argparse.Namespace) -> str:
    c: SoakCounts = report["counts"]
    rows = [
        *count_rows(c),
        ("engine SIGKILLs / restarts seen", f"{len(c.kills)} / {report['restarts']}"),
        (
            "all engines ready at the end",
            f"{'yes' if report['ready_at_end'] else 'NO'} (waited {report['settled_s']:.1f} s after the last request)",
        ),
        ("RSS kgserve start → end", f"{_mb(report['rss_start']['kgserve'])} → {_mb(report['rss_end']['kgserve'])}"),
        ("RSS engines start → end", f"{_mb(report['rss_start']['engines'])} → {_mb(report['rss_end']['engines'])}"),
        ("wall time", f"{report['elapsed_s']:.1f} s ({c.sent / max(report['elapsed_s'], 1e-9):.0f} req/s)"),
    ]
    head = (
        f"### Soak: {args.requests} requests, {args.disconnect_share:.0%} disconnects, {args.kills} engine kills, "
        f"{args.processes} engine(s), concurrency {args.concurrency}, {args.ids} distinct ids\n\n{machine_line()}\n\n"
    )
    return head + table(rows) + samples(c) + "\n"


def table(rows: list[tuple[str, str]]) -> str:
    return "| | |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows) + "\n"


def samples(c: SoakCounts) -> str:
    """The first response body of each failure kind."""
    return "".join(f"\n{kind} example: `{text.strip()}`" for kind, text in sorted(c.samples.items()))


def add_load_arguments(p: argparse.ArgumentParser, requests: int = 10000) -> None:
    """The options of the requests themselves (what send_requests reads), shared with soak_balanced."""
    p.add_argument("--requests", type=int, default=requests)
    p.add_argument("--disconnect-share", type=float, default=0.05)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--ids", type=int, default=8, help="distinct caller ids (fewer = more collisions)")
    p.add_argument("--engine-rps", type=float, default=1000.0, help="KGSERVE_SIM_FIXED_RPS of each sim engine")
    p.add_argument("--request-timeout", type=float, default=30.0)
    p.add_argument("--max-seconds", type=float, default=300.0, help="stop sending after this long")
    p.add_argument("--seed", type=int, default=0)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__.split("\n")[0])
    add_load_arguments(p)
    p.add_argument("--kills", type=int, default=3)
    p.add_argument("--processes", type=int, default=1, help="engine processes behind kgserve")
    p.add_argument("--min-ready", type=int, default=None, help="engine.min_ready (default: all engines)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = run_on_sim(soak(args))
    print(render(report, args))
    c: SoakCounts = report["counts"]
    return 0 if not c.lost and not c.cross_delivered and report["unaccounted"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
