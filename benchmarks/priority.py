"""Priority classes under batch load: interactive latency with and without classes, and the batch cost.

``python -m benchmarks.priority [--engine sim|katago] [--quick] [--json PATH]`` prints a Markdown table.

For each mode (classes off: `priority.classes: false`; classes on) a fresh kgserve subprocess is started:

1. idle: interactive queries one after another, nothing else running: the idle latency;
2. loaded: `batch_clients` closed-loop clients keep the engine saturated with batch queries
   (`X-Priority-Class: batch`, more in flight than KataGo has analysis threads, so its queue is never
   empty) while interactive queries (`X-Priority-Class: interactive`) arrive at a low fixed rate; their
   latency, and the batch queries finished per second, are measured over `measure_s` after a warm-up.

Targets (issue 15): interactive p99 under load within 2x of its idle p99, batch throughput with classes
>= 95% of without. Engines: the simulated one (`--engine sim`, real time), or the real KataGo named by
KGBENCH_KATAGO_BIN and KGBENCH_KATAGO_MODEL (`--engine katago`, Eigen/CPU build). Both read the cfg
written here (CFG_TEXT): few analysis threads, one search thread each, so the queue is what decides.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import httpx

from kgbench.load.latency import latency_stats
from kgbench.load.traffic import QuerySource
from kgbench.targets.kgserve_process import kgserve_running
from kgbench.targets.sim import cleanup_devices, sim_env, sim_settings
from kgbench.track.machine import machine_line
from kgserve.settings import BackendSettings, Settings

ENGINE_ENV = ("KGBENCH_KATAGO_BIN", "KGBENCH_KATAGO_MODEL")
CFG_TEXT = """# benchmarks.priority: a small analysis engine whose queue decides the order of work
maxVisits = 100
numAnalysisThreads = {threads}
numSearchThreadsPerAnalysisThread = 1
nnMaxBatchSize = 8
nnCacheSizePowerOfTwo = 16
nnMutexPoolSizePowerOfTwo = 12
reportAnalysisWinratesAs = BLACK
"""


@dataclass(frozen=True)
class Plan:
    threads: int = 2  # KataGo analysis threads: searches at once
    interactive_visits: int = 64
    batch_visits: int = 64
    batch_clients: int = 8  # batch queries kept in flight (> threads: KataGo's queue never runs dry)
    interactive_per_s: float = 1.0
    idle_queries: int = 20
    warmup_s: float = 5.0
    measure_s: float = 40.0
    rounds: int = 1  # (off, on) pairs, interleaved


QUICK = Plan(idle_queries=8, warmup_s=2.0, measure_s=12.0)
KATAGO = Plan(
    interactive_visits=32,
    batch_visits=32,
    batch_clients=6,
    interactive_per_s=0.5,
    idle_queries=10,
    measure_s=30.0,
    rounds=3,
)


@dataclass
class ModeResult:
    classes: bool
    idle_p50_ms: float
    idle_p99_ms: float
    loaded_p50_ms: float
    loaded_p99_ms: float
    interactive_samples: int
    batch_per_s: float
    batch_finished: int
    load_average: float  # highest 1-min load average of the machine seen after a loaded phase


def engine_settings(engine: str, cfg: Path, classes: bool) -> tuple[Settings, dict[str, str]]:
    """kgserve settings (one engine, the bench cfg, classes on/off) and its environment."""
    settings = sim_settings(1)
    env: dict[str, str]
    if engine == "sim":
        env = sim_env(KGSERVE_SIM_SPEED="1")
    else:
        missing = [name for name in ENGINE_ENV if not os.environ.get(name)]
        if missing:
            raise SystemExit(f"--engine katago needs {' and '.join(missing)} (the KataGo binary and its network)")
        backend = BackendSettings(
            command=[os.environ["KGBENCH_KATAGO_BIN"]], model=Path(os.environ["KGBENCH_KATAGO_MODEL"])
        )
        backends = {**settings.engine.backends, "eigen": backend}
        settings = settings.model_copy(
            update={"engine": settings.engine.model_copy(update={"backend": "eigen", "backends": backends})}
        )
        env = dict(os.environ)
    engine_part = settings.engine.model_copy(update={"cfg": cfg, "home_data_dir": cfg.parent / "katago_home"})
    priority = settings.priority.model_copy(update={"classes": classes})
    return settings.model_copy(update={"engine": engine_part, "priority": priority}), env


class Load:
    """The queries and the HTTP side: one shared client, positions from kgbench's query source."""

    def __init__(self, url: str, plan: Plan) -> None:
        self.url = url + "/analysis"
        self.plan = plan
        self.source = QuerySource.from_dirs(seed=15)
        self.count = 0
        limits = httpx.Limits(max_connections=plan.batch_clients + 16)
        self.client = httpx.AsyncClient(timeout=600, limits=limits)

    async def one(self, klass: str, visits: int) -> float:
        """Post one query; its latency in ms (request sent -> last byte)."""
        self.count += 1
        _, body = self.source.next()
        body.update(id=f"{klass}-{self.count}", maxVisits=visits)
        started = time.perf_counter()
        response = await self.client.post(self.url, content=json.dumps(body), headers={"x-priority-class": klass})
        elapsed = (time.perf_counter() - started) * 1000.0
        if response.status_code != 200 or b'"isDuringSearch":false' not in response.content:
            raise RuntimeError(f"{klass} query failed: {response.status_code} {response.content[:300]!r}")
        return elapsed

    async def idle(self) -> list[float]:
        return [await self.one("interactive", self.plan.interactive_visits) for _ in range(self.plan.idle_queries)]

    async def loaded(self) -> tuple[list[float], int, float]:
        """Interactive latencies, batch queries finished and the seconds measured, under batch saturation."""
        plan = self.plan
        finished: list[float] = []  # perf_counter of each batch completion

        async def batch_client() -> None:
            while True:
                await self.one("batch", plan.batch_visits)
                finished.append(time.perf_counter())

        async def interactive(latencies: list[float]) -> None:
            latencies.append(await self.one("interactive", plan.interactive_visits))

        batch = [asyncio.create_task(batch_client()) for _ in range(plan.batch_clients)]
        latencies: list[float] = []
        probes: list[asyncio.Task[None]] = []
        try:
            await asyncio.sleep(plan.warmup_s)
            start = time.perf_counter()
            for _ in range(max(1, round(plan.measure_s * plan.interactive_per_s))):
                probes.append(asyncio.create_task(interactive(latencies)))
                await asyncio.sleep(1.0 / plan.interactive_per_s)
            end = time.perf_counter()
            await asyncio.gather(*probes)  # the last probes finish under load too: batch keeps running
        finally:
            for task in batch + probes:
                task.cancel()
            await asyncio.gather(*batch, *probes, return_exceptions=True)
        done = sum(1 for moment in finished if start <= moment <= end)
        return latencies, done, end - start

    async def close(self) -> None:
        await self.client.aclose()


@dataclass
class Samples:
    """One mode's raw figures, summed over its rounds."""

    idle_ms: list[float] = field(default_factory=list)
    loaded_ms: list[float] = field(default_factory=list)
    batch_finished: int = 0
    seconds: float = 0.0
    load_averages: list[float] = field(default_factory=list)  # the machine's 1-min load after each loaded phase

    def result(self, classes: bool) -> ModeResult:
        idle_p50, _, idle_p99, _ = latency_stats(self.idle_ms)
        loaded_p50, _, loaded_p99, _ = latency_stats(self.loaded_ms)
        return ModeResult(
            classes=classes,
            idle_p50_ms=idle_p50,
            idle_p99_ms=idle_p99,
            loaded_p50_ms=loaded_p50,
            loaded_p99_ms=loaded_p99,
            interactive_samples=len(self.loaded_ms),
            batch_per_s=self.batch_finished / self.seconds if self.seconds > 0 else math.nan,
            batch_finished=self.batch_finished,
            load_average=max(self.load_averages, default=math.nan),
        )


async def measure(url: str, plan: Plan, into: Samples) -> None:
    load = Load(url, plan)
    try:
        await load.one("interactive", plan.interactive_visits)  # warm: first query, caches, connections
        into.idle_ms += await load.idle()
        latencies, done, seconds = await load.loaded()
    finally:
        await load.close()
    into.loaded_ms += latencies
    into.batch_finished += done
    into.seconds += seconds
    into.load_averages.append(os.getloadavg()[0])


def run(engine: str, plan: Plan) -> list[ModeResult]:
    """`plan.rounds` rounds of (classes off, classes on), interleaved so that a change in the machine's other
    load hits both modes alike; a fresh kgserve for each."""
    samples = {False: Samples(), True: Samples()}
    with tempfile.TemporaryDirectory(prefix="kgbench-priority-") as tmp:
        cfg = Path(tmp) / "priority_bench.cfg"
        cfg.write_text(CFG_TEXT.format(threads=plan.threads), encoding="utf-8")
        try:
            for round_index in range(plan.rounds):
                for classes in (False, True):
                    settings, env = engine_settings(engine, cfg, classes)
                    with kgserve_running(settings, env, ready_timeout_s=180.0) as proc:
                        assert proc.url is not None
                        asyncio.run(measure(proc.url, plan, samples[classes]))
                    print(f"# round {round_index + 1}: classes {'on' if classes else 'off'} done", file=sys.stderr)
        finally:
            cleanup_devices()
    return [samples[False].result(False), samples[True].result(True)]


def table(engine: str, plan: Plan, results: list[ModeResult]) -> str:
    without = next((r for r in results if not r.classes), None)
    lines = [
        f"Engine: {engine} · {plan.threads} analysis threads · interactive {plan.interactive_visits} visits at "
        f"{plan.interactive_per_s:g}/s · batch {plan.batch_visits} visits, {plan.batch_clients} in flight · "
        f"measured {plan.measure_s:g} s after {plan.warmup_s:g} s, {plan.rounds} interleaved round(s) per mode",
        "",
        "| classes | idle p50 ms | idle p99 ms | loaded p50 ms | loaded p99 ms | p99 loaded/idle | "
        "interactive n | batch q/s | batch vs no classes | machine load |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        ratio = r.loaded_p99_ms / r.idle_p99_ms if r.idle_p99_ms else math.nan
        share = r.batch_per_s / without.batch_per_s if without and without.batch_per_s else math.nan
        lines.append(
            f"| {'on' if r.classes else 'off'} | {r.idle_p50_ms:.0f} | {r.idle_p99_ms:.0f} | {r.loaded_p50_ms:.0f} | "
            f"{r.loaded_p99_ms:.0f} | {ratio:.2f}x | {r.interactive_samples} | {r.batch_per_s:.2f} | {share:.0%} | "
            f"{r.load_average:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--engine", choices=("sim", "katago"), default="sim")
    parser.add_argument("--quick", action="store_true", help="short phases (a smoke run, not figures)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--measure-s", type=float, help="seconds of measurement under load")
    parser.add_argument("--threads", type=int, help="numAnalysisThreads of the engine (default 2)")
    parser.add_argument("--rounds", type=int, help="interleaved (off, on) rounds (default: sim 1, katago 3)")
    args = parser.parse_args(argv)
    plan = KATAGO if args.engine == "katago" else Plan()
    if args.quick:
        plan = replace(plan, idle_queries=QUICK.idle_queries, warmup_s=QUICK.warmup_s, measure_s=QUICK.measure_s)
    if args.measure_s:
        plan = replace(plan, measure_s=args.measure_s)
    if args.rounds:
        plan = replace(plan, rounds=args.rounds)
    if args.threads:
        plan = replace(plan, threads=args.threads, batch_clients=max(plan.batch_clients, 3 * args.threads))
    results = run(args.engine, plan)
    print(machine_line().replace("simulated engine", f"{args.engine} engine"))
    print()
    print(table(args.engine, plan, results))
    if args.json:
        payload = {"engine": args.engine, "plan": asdict(plan), "results": [asdict(r) for r in results]}
        args.json.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
