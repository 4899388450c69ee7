"""Hostile clients against a real kgserve: does everyone else still get served, and does kgserve recover?

``python -m benchmarks.hostile [--only NAME ...] [sizes and timings: --help]``

kgserve runs as a subprocess (``python -m kgserve``, sim engine at real speed, loopback), with
runtime/config.yaml's limits as shipped (``--max-inflight`` scales the server-wide bound down). Each attack comes
from attacker addresses of its own (127.0.1.x: kgserve's per-client caps see them as other clients) while a
well-behaved client on 127.0.0.1 posts a small query every 0.5 s; then kgserve must settle (queries in flight and
outstanding visits back to 0 within 30 s). Per attack the table gives whether the other client was served, the
settle, how many of the attack's connections kgserve closed, kgserve's RSS before, at its peak and after, the
attack's own checks and figures. An attack is held when all of that holds (RSS after within 20 MB of before);
exit status 0 only if every attack run held.

Attacks (benchmarks/hostile_attacks/): the first round's (issue 12: slowloris on headers and bodies, idle
connections, clients that never read a stream, header floods, half-close) and issue 27's ten: concurrent ~1 MB
queries (memory), pings from a WebSocket that never reads, terminates with huge turnNumbers, a cut-off WebSocket
keeping its socket, one client taking every slot (and every connection), an interactive flood, a float in
priorities, partial-result floods, a frozen engine, SIGTERM with WebSocket queries in flight; and issue 36's
floods from one client (benchmarks/hostile_attacks/floods.py): small invalid lines over WebSockets, pipelined
requests over HTTP, while another client's query and /healthz are timed. Every wait is bounded; the whole run stays
under ``--max-seconds``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import yaml

from benchmarks.common import rss_mb
from benchmarks.hostile_attacks import connections, engines, fairness, floods, memory, ws_attacks
from benchmarks.hostile_attacks.common import PROBE, AttackContext, Outcome, metric
from benchmarks.priority import CFG_TEXT
from kgbench.targets.kgserve_process import KgserveProcess
from kgbench.targets.sim import cleanup_devices, sim_env, sim_settings
from kgbench.track.machine import machine_line
from kgserve.settings import LimitsSettings, Settings

MAX_GROWTH_MB = 20.0
INTERACTIVE_TOKEN = "hostile-interactive-token-4b1e"  # the credential the float-priorities attack holds


@dataclass
class AttackResult:
    name: str
    what: str
    probes_ok: int = 0
    probes: int = 0
    probe_worst_s: float = 0.0
    probe_times: list[float] = field(default_factory=list)  # each probe's time, answered or not
    outcome: Outcome = field(default_factory=Outcome)
    probed: bool = True
    inflight_zero: bool = False
    settle_s: float = 0.0
    rss_before: float | None = None
    rss_after: float | None = None
    notes: list[str] = field(default_factory=list)
    ran: bool = False

    @property
    def growth(self) -> float:
        if self.rss_before is None or self.rss_after is None:
            return float("inf")
        return self.rss_after - self.rss_before

    @property
    def held(self) -> bool:
        out = self.outcome
        closed = out.opened is None or out.closed == out.opened
        served = not self.probed or (self.probes > 0 and self.probes_ok == self.probes)
        settled = self.inflight_zero or not self.settle_s  # not settled: the drain attack (its kgserve is gone)
        return served and closed and settled and self.growth < MAX_GROWTH_MB and all(out.checks.values())


# -- servers ---------------------------------------------------------------------------------------------------
def _config(settings: Settings, directory: Path, args: argparse.Namespace) -> Path:
    data = settings.model_dump(mode="json")
    data["server"].update(host="127.0.0.1", port=0, auth_token_env=None)
    data["priority"]["interactive_token_env"] = "KGSERVE_HOSTILE_INTERACTIVE"
    if args.max_inflight is not None:
        data["limits"]["max_inflight_queries"] = args.max_inflight
    if args.fairness:
        data["priority"]["fairness"] = True
    if args.thread_reserve is not None:
        data["engine"]["thread_reserve"] = args.thread_reserve
    if args.lend_bound_s is not None:
        data["engine"]["lend_bound_s"] = args.lend_bound_s
    if args.messages_per_s is not None:
        data["websocket"]["max_messages_per_s"] = args.messages_per_s
    if args.messages_per_s_per_client is not None:
        data["limits"]["max_messages_per_s_per_client"] = args.messages_per_s_per_client
    path = directory / "kgserve_hostile.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@contextlib.contextmanager
def hostile_server(kind: str, args: argparse.Namespace) -> Iterator[tuple[KgserveProcess, Settings, dict[str, str]]]:
    """kgserve for the attacks of `kind`: shared (one engine, the served cfg), queue (one engine whose queue
    decides: `--queue-threads` analysis threads, and no thread reserve unless `--thread-reserve` says: with one,
    the victim, another client holding no thread, takes a reserved thread whatever the priority classes, so the
    queue's order is not what would be measured), pool (two engines), drain (one engine, a short grace period)."""
    settings = sim_settings(2 if kind == "pool" else 1)
    env = sim_env(None, device=f"hostile{kind}{os.getpid()}", KGSERVE_SIM_SPEED="1")
    env["KGSERVE_HOSTILE_INTERACTIVE"] = INTERACTIVE_TOKEN
    with tempfile.TemporaryDirectory(prefix="kgserve-hostile-") as tmp:
        if kind == "queue":
            cfg = Path(tmp) / "queue.cfg"
            cfg.write_text(CFG_TEXT.format(threads=args.queue_threads), encoding="utf-8")
            reserve = 0.0 if args.thread_reserve is None else args.thread_reserve
            engine = settings.engine.model_copy(update={"cfg": cfg, "thread_reserve": reserve})
            settings = settings.model_copy(update={"engine": engine})
        if kind == "drain":
            server = settings.server.model_copy(update={"grace_period_s": args.drain_grace})
            settings = settings.model_copy(update={"server": server})
        config = _config(settings, Path(tmp), args)
        proc = KgserveProcess(config, Path(tmp) / "kgserve.log", env)
        proc.start()
        try:
            proc.wait_ready(90)
            async_warm_up(proc)
            yield proc, settings.model_copy(update={"limits": _limits(settings, args)}), env
        finally:
            proc.stop(grace_s=args.drain_grace + 5)


def _limits(settings: Settings, args: argparse.Namespace) -> LimitsSettings:
    if args.max_inflight is None:
        return settings.limits
    return settings.limits.model_copy(update={"max_inflight_queries": args.max_inflight})


def async_warm_up(proc: KgserveProcess) -> None:
    """A few requests, so that an attack's RSS baseline is not the cold start."""

    async def warm() -> None:
        assert proc.url is not None
        async with aiohttp.ClientSession() as session:
            for _ in range(20):
                async with session.post(proc.url + "/analysis", data=PROBE) as response:
                    await response.read()

    asyncio.run(warm())


# -- one attack --------------------------------------------------------------------------------------------------
async def probe(url: str, stop: asyncio.Event, result: AttackResult) -> None:
    """The well-behaved client (127.0.0.1): one small query every 0.5 s until `stop`."""
    timeout = aiohttp.ClientTimeout(total=15)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while not stop.is_set():
            started = time.monotonic()
            result.probes += 1
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.post(url + "/analysis", data=PROBE) as response:
                    await response.read()
                    if response.status == 200:
                        result.probes_ok += 1
            result.probe_times.append(time.monotonic() - started)
            result.probe_worst_s = max(result.probe_times)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)


Attack = Callable[[AttackContext, float], Awaitable[Outcome]]


@dataclass(frozen=True)
class Plan:
    name: str
    what: str
    run: Attack
    seconds: Callable[[argparse.Namespace, Settings], float]
    server: str = "shared"
    probed: bool = True  # the well-behaved client runs beside it (an attack that times its own victim: no)


async def settle(url: str, result: AttackResult) -> None:
    began = time.monotonic()
    while time.monotonic() - began < 30:
        if (
            await metric(url, "kgserve_inflight_queries") == 0
            and await metric(url, "kgserve_engine_outstanding_visits") == 0
        ):
            result.inflight_zero = True
            break
        await asyncio.sleep(0.2)
    result.settle_s = time.monotonic() - began


async def run_attack(
    proc: KgserveProcess, settings: Settings, env: dict[str, str], plan: Plan, args: argparse.Namespace
) -> AttackResult:
    assert proc.url is not None and proc.proc is not None
    ctx = AttackContext(proc.url, int(proc.url.rsplit(":", 1)[1]), proc.proc.pid, args, settings, env)
    seconds = plan.seconds(args, settings)
    result = AttackResult(plan.name, plan.what, probed=plan.probed, ran=True)
    result.rss_before = rss_mb(proc.proc.pid)
    stop = asyncio.Event()
    prober = asyncio.create_task(probe(proc.url, stop, result) if plan.probed else stop.wait())
    try:
        result.outcome = await asyncio.wait_for(plan.run(ctx, seconds), seconds + 120)
    except TimeoutError:
        result.notes.append("attack did not finish in time")
    except Exception as exc:
        result.notes.append(f"attack failed: {type(exc).__name__}: {exc}")
    finally:
        stop.set()
        await prober
    await settle(proc.url, result)
    await asyncio.sleep(1.0)  # let closed connections be collected before reading RSS
    result.rss_after = rss_mb(proc.proc.pid)
    return result


def run_drain(args: argparse.Namespace) -> AttackResult:
    """SIGTERM with WebSocket queries in flight: a kgserve of its own, stopped by the attack."""
    result = AttackResult("ws-drain", f"SIGTERM, {args.drain_queries} ws queries in flight", probed=False, ran=True)
    with hostile_server("drain", args) as (proc, _, _):
        assert proc.url is not None and proc.proc is not None
        result.rss_before = result.rss_after = rss_mb(proc.proc.pid)

        def stop() -> None:
            proc.stop(grace_s=args.drain_grace + 5)

        try:
            result.outcome = asyncio.run(
                ws_attacks.drain_on_sigterm(proc.url, stop, args.drain_queries, args.drain_grace)
            )
        except Exception as exc:
            result.notes.append(f"attack failed: {type(exc).__name__}: {exc}")
        result.outcome.checks["kgserve exited 0"] = proc.proc.returncode == 0
    return result


def _timed(name: str) -> Callable[[argparse.Namespace, Settings], float]:
    return lambda a, s: float(getattr(a, name))


PLANS = [
    Plan(
        "slowloris-headers",
        "200 conns, a header byte/s",
        connections.slowloris_headers,
        lambda a, s: s.server.header_timeout_s + 5,
    ),
    Plan(
        "slowloris-bodies",
        "200 conns, a body byte/s",
        connections.slowloris_bodies,
        lambda a, s: s.server.body_timeout_s + 5,
    ),
    Plan(
        "idle",
        "1,000 conns from 25 addresses, never a byte",
        connections.idle_connections,
        lambda a, s: s.server.header_timeout_s + 5,
    ),
    Plan("never-read", "10 clients never read a stream", connections.never_readers, _timed("never_read_seconds")),
    Plan(
        "header-flood",
        "10 clients: 32 MB unfinished header, again",
        connections.header_floods,
        _timed("attack_seconds"),
    ),
    Plan("half-close", "10 clients: long query, SHUT_WR, again", connections.half_close, _timed("attack_seconds")),
    Plan("memory", "concurrent ~1 MB queries", memory.big_queries, _timed("attack_seconds")),
    Plan("ws-pings", "a WebSocket pings, never reads", ws_attacks.ping_flood, _timed("attack_seconds")),
    Plan("ws-terminate", "terminates with huge turnNumbers", ws_attacks.terminate_flood, _timed("attack_seconds")),
    Plan("ws-cut-off", "a WebSocket streams, never reads", ws_attacks.cut_off_socket, _timed("attack_seconds")),
    Plan("slot-hog", "one client: WebSockets x queries kept in flight", fairness.slot_hog, _timed("attack_seconds")),
    Plan(
        "connection-cap",
        "1,000 conns from one address",
        connections.connection_cap,
        lambda a, s: s.server.header_timeout_s + 5,
    ),
    Plan(
        "interactive-flood",
        "uncredentialed interactive flood",
        fairness.interactive_flood,
        _timed("attack_seconds"),
        server="queue",
        probed=False,
    ),
    Plan(
        "float-priority",
        "batch priorities [4.0e18] vs interactive",
        fairness.float_priorities,
        _timed("attack_seconds"),
        server="queue",
        probed=False,
    ),
    Plan(
        "partial-flood", "64 queries, reportDuringSearchEvery 0.001", fairness.partial_flood, _timed("attack_seconds")
    ),
    Plan(
        "ws-message-flood",
        "one client's WebSockets: small invalid lines, answers read",
        floods.message_flood,
        _timed("attack_seconds"),
        probed=False,
    ),
    Plan(
        "http-request-flood",
        "one client's connections: pipelined requests of an invalid line",
        floods.request_flood,
        _timed("attack_seconds"),
        probed=False,
    ),
    Plan(
        "frozen-engine",
        "an idle engine of two SIGSTOPped",
        engines.frozen_engine,
        _timed("frozen_seconds"),
        server="pool",
    ),
]
DRAIN = "ws-drain"


def run_server_plans(kind: str, plans: list[Plan], args: argparse.Namespace, deadline: float) -> list[AttackResult]:
    results: list[AttackResult] = []
    with hostile_server(kind, args) as (proc, settings, env):
        for plan in plans:
            if time.monotonic() + plan.seconds(args, settings) + 40 > deadline:
                results.append(AttackResult(plan.name, plan.what, notes=["not run: --max-seconds"]))
                continue
            results.append(asyncio.run(run_attack(proc, settings, env, plan, args)))
            print(render_row(results[-1]), file=sys.stderr, flush=True)
    return results


def hostile(args: argparse.Namespace) -> list[AttackResult]:
    deadline = time.monotonic() + args.max_seconds
    chosen = [plan for plan in PLANS if not args.only or plan.name in args.only]
    results: list[AttackResult] = []
    for kind in ("shared", "queue", "pool"):
        plans = [plan for plan in chosen if plan.server == kind]
        if plans:
            results += run_server_plans(kind, plans, args, deadline)
    if not args.only or DRAIN in args.only:
        results.append(run_drain(args))
        print(render_row(results[-1]), file=sys.stderr, flush=True)
    return results


# -- the table ----------------------------------------------------------------------------------------------------
def render_row(r: AttackResult) -> str:
    out = r.outcome
    if not r.ran:
        return f"| {r.name} | {r.what} | - | - | - | - | - | not run ({'; '.join(r.notes)}) |"
    median = f"median {statistics.median(r.probe_times):.2f} s, " if r.probe_times else ""
    served = f"{r.probes_ok}/{r.probes} ({median}worst {r.probe_worst_s:.2f} s)" if r.probed else "its own figures"
    settled = f"{'yes' if r.inflight_zero else 'NO'} ({r.settle_s:.1f} s)" if r.settle_s else "n/a"
    closed = f"{out.closed}/{out.opened}" if out.opened is not None else "n/a"
    before = "-" if r.rss_before is None else f"{r.rss_before:.0f}"
    after = "-" if r.rss_after is None else f"{r.rss_after:.0f}"
    peak = "" if out.peak_rss_mb is None else f" (peak {out.peak_rss_mb:.0f})"
    checks = "; ".join(f"{name}: {'yes' if ok else 'NO'}" for name, ok in out.checks.items())
    details = "; ".join(filter(None, [*out.figures, checks, *r.notes]))
    return (
        f"| {r.name} | {r.what} | {served} | {settled} | {closed} | {before} → {after} MB{peak} ({r.growth:+.1f}) | "
        f"{details} | {'held' if r.held else 'BROKE'} |"
    )


def render(results: list[AttackResult]) -> str:
    head = (
        "| attack | what | other clients served | in-flight back to 0 (settle) | conns closed by kgserve | "
        "kgserve RSS before → after | what it met | verdict |\n|---|---|---|---|---|---|---|---|\n"
    )
    return f"### Hostile clients\n\n{machine_line()}\n\n" + head + "\n".join(render_row(r) for r in results) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.hostile", description=__doc__.split("\n")[0])
    p.add_argument("--attack-seconds", type=float, default=15.0, help="length of most attacks")
    p.add_argument("--never-read-seconds", type=float, default=60.0)
    p.add_argument("--frozen-seconds", type=float, default=15.0)
    p.add_argument("--max-inflight", type=int, default=None, help="limits.max_inflight_queries (default: shipped)")
    p.add_argument("--fairness", action="store_true", help="priority.fairness true (the levels on; shipped off)")
    p.add_argument(
        "--thread-reserve", type=float, default=None, help="engine.thread_reserve (default: shipped; 0: off)"
    )
    p.add_argument(
        "--lend-bound-s", type=float, default=None, help="engine.lend_bound_s (default: shipped; 0: never lend)"
    )
    p.add_argument("--memory-queries", type=int, default=1000)
    p.add_argument("--memory-query-bytes", type=int, default=1_000_000)
    p.add_argument("--memory-clients", type=int, default=1, help="addresses the ~1 MB queries come from")
    p.add_argument("--turn-numbers", type=int, default=100_000, help="entries of each terminate's turnNumbers")
    p.add_argument("--slot-connections", type=int, default=32)
    p.add_argument("--slot-queries", type=int, default=64)
    p.add_argument("--slot-visits", type=int, default=100, help="visits of each slot-hog query")
    p.add_argument("--queue-threads", type=int, default=32, help="numAnalysisThreads of the flood attacks' engine")
    p.add_argument("--flood-queries", type=int, default=64, help="closed-loop queries of the floods")
    p.add_argument("--flood-visits", type=int, default=64)
    p.add_argument("--message-rate", type=float, default=60_000, help="messages a second of the message flood, in all")
    p.add_argument("--message-processes", type=int, default=2, help="flooding processes (one client: one address)")
    p.add_argument("--message-connections", type=int, default=1, help="WebSockets of each flooding process")
    p.add_argument("--request-rate", type=float, default=20_000, help="requests a second of the request flood, in all")
    p.add_argument("--request-connections", type=int, default=64, help="connections of each request-flood process")
    p.add_argument("--messages-per-s", type=int, default=None, help="websocket.max_messages_per_s (0: no bound)")
    p.add_argument(
        "--messages-per-s-per-client", type=int, default=None, help="limits.max_messages_per_s_per_client (0: none)"
    )
    p.add_argument("--drain-queries", type=int, default=50)
    p.add_argument("--drain-grace", type=float, default=5.0, help="server.grace_period_s of the drain attack")
    names = [plan.name for plan in PLANS] + [DRAIN]
    p.add_argument("--only", nargs="*", choices=names, help="run only these attacks")
    p.add_argument("--max-seconds", type=float, default=1800.0, help="skip attacks that would not fit")
    return p.parse_args(argv)


def _raise_fd_limit(wanted: int = 8192) -> None:
    """1,000 idle connections need 1,000 descriptors here and in kgserve (which inherits the limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _raise_fd_limit()
    try:
        results = hostile(args)
    finally:
        cleanup_devices()
    print(render(results))
    ran = [r for r in results if r.ran]
    return 0 if ran and all(r.held for r in ran) else 1


if __name__ == "__main__":
    sys.exit(main())
