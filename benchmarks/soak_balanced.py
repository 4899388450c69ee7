"""The soak through HAProxy: several kgserve (sim engine) behind one address, an engine killed and a whole kgserve
killed under load.

``python -m benchmarks.soak_balanced --backends 3 --requests 6000 --engine-restart-s 5``

HAProxy (cfg from kgserve.haproxy, the runtime config's balancer timings) runs over ``--backends`` kgserve
subprocesses, one engine each (one kgserve per GPU). The requests are the soak's (benchmarks.soak: colliding
ids, each answer checked for its id, turn and visits, a share of clients hanging up). When a third of them is
answered, the engine of kgserve0 is SIGKILLed (its replacement takes ``--engine-restart-s`` to start, so kgserve0
is unready that long); at two thirds, kgserve1 is SIGKILLed with its engine. HAProxy's stats socket is read every
``--poll-s``: when each backend left the rotation after its kill, when kgserve0 came back, and how many requests
HAProxy still sent a backend while it was out (must be 0). Exit 0 when nothing was lost or cross-delivered.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import free_port, run_on_sim
from benchmarks.soak import SoakCounts, add_load_arguments, count_rows, samples, send_requests, table, unaccounted
from kgbench.targets.haproxy_proc import BackendStat, HAProxyProcess, with_balancer
from kgbench.targets.kgserve_process import KgserveProcess, engine_pids, kgserve_running
from kgbench.targets.sim import sim_env, sim_settings
from kgbench.track.machine import machine_line

__all__ = ["Timeline", "main", "soak_balanced"]


@dataclass
class Timeline:
    """HAProxy's view of each backend over time: (monotonic time, stats) samples, and the kills."""

    samples: list[tuple[float, dict[str, BackendStat]]] = field(default_factory=list)
    kills: dict[str, float] = field(default_factory=dict)  # backend name -> when it (or its engine) was killed

    def first(self, name: str, after: float, down: bool) -> float | None:
        """When `name` was first seen DOWN (down=True) or UP again, after `after`."""
        for t, stats in self.samples:
            status = stats[name].status if name in stats else ""
            if t >= after and (status.startswith("DOWN") if down else status == "UP"):
                return t
        return None

    def out(self, name: str) -> float | None:
        """When `name` left the rotation after its kill."""
        killed = self.kills.get(name)
        return None if killed is None else self.first(name, killed, down=True)

    def back(self, name: str) -> float | None:
        """When `name` was back in the rotation after it left it."""
        out = self.out(name)
        return None if out is None else self.first(name, out, down=False)

    def sent_while_down(self, name: str) -> int:
        """Requests HAProxy sent `name` between two samples that both saw it DOWN."""
        sent = 0
        for (_, a), (_, b) in zip(self.samples, self.samples[1:], strict=False):
            if name in a and name in b and a[name].status.startswith("DOWN") and b[name].status.startswith("DOWN"):
                sent += b[name].sessions - a[name].sessions
        return sent


async def _chaos(servers: list[KgserveProcess], counts: SoakCounts, args: argparse.Namespace, tl: Timeline) -> None:
    """Engine of kgserve0 at 1/3 of the answers, all of kgserve1 at 2/3."""
    for k, name in enumerate(("kgserve0", "kgserve1")):
        threshold = args.requests * (k + 1) // 3
        while counts.answered + counts.disconnected < threshold:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        server = servers[k]
        if name == "kgserve0":
            pids = await asyncio.to_thread(engine_pids, server, True)
            os.kill(pids[0], signal.SIGKILL)
            counts.kills.append(pids[0])
        else:
            assert server.proc is not None
            server.kill_tree()
            counts.kills.append(server.proc.pid)
        tl.kills[name] = time.monotonic()


async def _poll(haproxy: HAProxyProcess, tl: Timeline, poll_s: float, done: asyncio.Event) -> None:
    while not done.is_set():
        stats = await asyncio.to_thread(haproxy.backend_stats)
        tl.samples.append((time.monotonic(), stats))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), poll_s)


async def soak_balanced(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    settings = sim_settings(1)
    counts = SoakCounts()
    timeline = Timeline()
    with contextlib.ExitStack() as stack:
        servers = []
        for i in range(args.backends):
            # kgserve0's engines start in engine_restart_s: after its kill it stays unready that long
            extra = {"KGSERVE_SIM_STARTUP_S": f"{args.engine_restart_s:g}"} if i == 0 else {}
            env = sim_env(args.engine_rps, device=f"balanced{os.getpid()}-{i}", **extra)
            servers.append(stack.enter_context(kgserve_running(settings, env)))
        ports = [int(str(s.url).rsplit(":", 1)[1]) for s in servers]
        balanced = with_balancer(settings, free_port(), [("127.0.0.1", p) for p in ports])
        haproxy = HAProxyProcess(balanced, workdir)
        stack.callback(haproxy.stop)
        haproxy.start()
        for i in range(args.backends):
            if not haproxy.wait_status(f"kgserve{i}", "UP", 30):
                raise RuntimeError(f"kgserve{i} never came UP in HAProxy: {haproxy.backend_stats()}")
        done = asyncio.Event()
        poller = asyncio.create_task(_poll(haproxy, timeline, args.poll_s, done))
        chaos = asyncio.create_task(_chaos(servers, counts, args, timeline))
        started = time.monotonic()
        await send_requests(haproxy.url + "/analysis", args, counts, started + args.max_seconds)
        elapsed = time.monotonic() - started
        chaos.cancel()
        # keep watching until kgserve0 was out and is back (or 30 s), to report when it rejoined
        back_by = time.monotonic() + 30
        while time.monotonic() < back_by and "kgserve0" in timeline.kills and timeline.back("kgserve0") is None:  # noqa: ASYNC110
            await asyncio.sleep(args.poll_s)
        done.set()
        await poller
        with contextlib.suppress(asyncio.CancelledError):
            await chaos
    assert balanced.balancer is not None
    return {"counts": counts, "timeline": timeline, "elapsed_s": elapsed, "balancer": balanced.balancer}


def _since_kill(tl: Timeline, name: str, when: float | None) -> str:
    killed = tl.kills.get(name)
    if killed is None:
        return "not killed (run too short)"
    return "not seen" if when is None else f"{when - killed:.1f} s"


def render(report: dict[str, Any], args: argparse.Namespace) -> str:
    c: SoakCounts = report["counts"]
    tl: Timeline = report["timeline"]
    b = report["balancer"]
    final = tl.samples[-1][1] if tl.samples else {}
    spread = ", ".join(f"{name}: {stat.sessions}" for name, stat in sorted(final.items()))
    rows = [
        *count_rows(c),
        ("kgserve0 (engine SIGKILLed) out of the rotation after", _since_kill(tl, "kgserve0", tl.out("kgserve0"))),
        ("kgserve0 back in the rotation after", _since_kill(tl, "kgserve0", tl.back("kgserve0"))),
        ("kgserve1 (SIGKILLed, engine too) out of the rotation after", _since_kill(tl, "kgserve1", tl.out("kgserve1"))),
        ("requests sent to a backend while it was out", f"{sum(tl.sent_while_down(n) for n in final)}"),
        ("requests HAProxy sent each backend (replays included)", spread or "-"),
        ("wall time", f"{report['elapsed_s']:.1f} s ({c.sent / max(report['elapsed_s'], 1e-9):.0f} req/s)"),
    ]
    head = (
        f"### Soak through HAProxy: {args.backends} kgserve (1 sim engine each), {args.requests} requests, "
        f"{args.disconnect_share:.0%} disconnects, concurrency {args.concurrency}, {args.ids} distinct ids; "
        f"checks every {b.check_interval_s:g} s, fall {b.fall}, rise {b.rise}, error_limit {b.error_limit}; "
        f"engine restart {args.engine_restart_s:g} s\n\n{machine_line()}\n\n"
    )
    return head + table(rows) + samples(c) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.soak_balanced", description=__doc__.split("\n")[0])
    add_load_arguments(p, requests=6000)
    p.add_argument("--backends", type=int, default=3, help="kgserve processes behind HAProxy (at least 2)")
    p.add_argument("--engine-restart-s", type=float, default=5.0, help="start-up time of kgserve0's sim engines")
    p.add_argument("--poll-s", type=float, default=0.1, help="HAProxy stats sampling period")
    args = p.parse_args(argv)
    if args.backends < 2:
        p.error("--backends must be at least 2 (one engine and one kgserve are killed)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kgbench-balanced-") as tmp:
        report = run_on_sim(soak_balanced(args, Path(tmp)))
    print(render(report, args))
    c: SoakCounts = report["counts"]
    return 0 if not c.lost and not c.cross_delivered and unaccounted(c) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
