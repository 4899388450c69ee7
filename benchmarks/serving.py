"""Serving-layer benchmark suite: what kgserve costs compared with the direct pipe, and what a pool buys.

``python -m benchmarks.serving [--quick]`` prints Markdown tables (date and machine on top):

1. HTTP/direct ratio with the sim engine's capacity fixed at 100, 500 and 2,000 req/s (``KGSERVE_SIM_FIXED_RPS``):
   the same closed-loop load once through a real kgserve subprocess, once straight into an EnginePool.
2. kgserve's maximum req/s with a zero-cost engine (``KGSERVE_SIM_FIXED_RPS=0``) at concurrency 64 and 256.
3. kgserve's CPU µs per request (process CPU time of the kgserve process / requests answered, engines excluded)
   with ~1 KB and ~12 KB responses, and the headroom that implies for one core.
4. A pool of 1, 2 and 4 sim engines (throughput model on) sharing one simulated device, through kgserve.

Everything runs on loopback with the load generator on the same machine, so on a small box the figures are a
lower bound for kgserve; runs where the load generator itself could not keep up are marked (self-watch).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import psutil

from benchmarks.common import run_on_sim
from kgbench.load.generator import run_direct, run_load
from kgbench.load.traffic import QuerySource, ShapedSource
from kgbench.load.types import LevelSummary, LoadResult, LoadSettings
from kgbench.targets.direct import open_pool
from kgbench.targets.kgserve_process import kgserve_running
from kgbench.targets.sim import sim_env, sim_settings
from kgbench.track.machine import machine_line
from kgserve.katago.cfg import read_cfg
from kgserve.sim.model.throughput import predict_throughput

BASE_LOAD = LoadSettings(
    concurrency=(64,), warmup_s=1.0, window_s=1.0, min_windows=3, max_windows=6, tolerance=0.1, max_visits=10
)
QUICK_LOAD = replace(BASE_LOAD, warmup_s=0.3, window_s=0.4, min_windows=2, max_windows=3, tolerance=0.3)
ASSUMED_ENGINE_RPS = 2000.0  # engine req/s the headroom is stated against (top of the sim capacity range)


@dataclass
class HttpRun:
    result: LoadResult
    kgserve_cpu_s: float
    answered: int
    mean_bytes: float


def _cpu(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


async def http_run(
    load: LoadSettings,
    env: dict[str, str],
    processes: int = 1,
    queries: QuerySource | None = None,
    cfg: Path | None = None,
) -> HttpRun:
    settings = sim_settings(processes)
    if cfg is not None:
        settings = settings.model_copy(update={"engine": settings.engine.model_copy(update={"cfg": cfg})})
    with kgserve_running(settings, env) as proc:
        assert proc.url is not None and proc.proc is not None
        pid = proc.proc.pid
        cpu0 = _cpu(pid)
        result = await run_load(proc.url, load, queries or QuerySource.from_dirs(seed=load.seed))
        cpu1 = _cpu(pid)
    ok = [r for r in result.records if r.status == 200]
    mean_bytes = sum(r.bytes for r in ok) / len(ok) if ok else math.nan
    return HttpRun(result, cpu1 - cpu0, len(result.records), mean_bytes)


async def direct_run(load: LoadSettings, env: dict[str, str], processes: int = 1) -> LoadResult:
    async with open_pool(sim_settings(processes), env=env, ready_timeout_s=90) as pool:
        return await run_direct(pool, load, QuerySource.from_dirs(seed=load.seed))


def _flag(result: LoadResult) -> str:
    notes = []
    if result.unstable:
        notes.append("unstable")
    if result.invalid:
        notes.append(f"invalid: {result.invalid_reason}")
    return "; ".join(notes) or "ok"


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.1f}"


def _head(result: LoadResult) -> LevelSummary:
    head = result.headline()
    assert head is not None
    return head


async def ratio_section(load: LoadSettings, rates: tuple[float, ...]) -> tuple[str, list[float]]:
    rows = [
        "| engine capacity (req/s) | direct req/s | HTTP req/s | HTTP/direct | direct p50 / p99 ms | HTTP p50 / p99 ms "
        "| notes |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    ratios = []
    for rps in rates:
        env = sim_env(rps, device=f"ratio{os.getpid()}-{rps:g}")
        d = _head(await direct_run(load, env))
        h_run = await http_run(load, env)
        h = _head(h_run.result)
        ratio = h.req_per_s / d.req_per_s if d.req_per_s else math.nan
        ratios.append(ratio)
        rows.append(
            f"| {rps:,.0f} | {d.req_per_s:,.0f} | {h.req_per_s:,.0f} | {ratio:.3f} | {_ms(d.p50_ms)} / {_ms(d.p99_ms)} "
            f"| {_ms(h.p50_ms)} / {_ms(h.p99_ms)} | {_flag(h_run.result)} |"
        )
    title = f"#### HTTP vs direct (closed loop, concurrency {load.concurrency[0]}, sim capacity fixed)\n\n"
    return title + "\n".join(rows) + "\n", ratios


async def zero_cost_section(load: LoadSettings) -> str:
    zl = replace(load, concurrency=(64, 256), request_timeout_s=30.0)
    env = sim_env(0, device=f"zero{os.getpid()}")
    run = await http_run(zl, env)
    rows = ["| concurrency | req/s | p50 ms | p99 ms | errors | notes |", "|---:|---:|---:|---:|---:|---|"]
    for lv in run.result.levels:
        rows.append(
            f"| {lv.concurrency} | {lv.req_per_s:,.0f} | {_ms(lv.p50_ms)} | {_ms(lv.p99_ms)} | {lv.errors} "
            f"| {_flag(run.result)} |"
        )
    return "#### kgserve maximum with a zero-cost engine (KGSERVE_SIM_FIXED_RPS=0)\n\n" + "\n".join(rows) + "\n"


async def cpu_section(load: LoadSettings) -> tuple[str, list[float]]:
    shapes = [("~1 KB", 3, {}), ("~12 KB", 60, {"includeOwnership": True, "includePolicy": True})]
    rows = [
        "| response | mean bytes | requests | kgserve CPU s | CPU µs / request | req/s on one core | headroom vs "
        f"{ASSUMED_ENGINE_RPS:,.0f} req/s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    per_request = []
    for label, visits, extra in shapes:
        env = sim_env(0, device=f"cpu{os.getpid()}")
        cl = replace(load, concurrency=(32,), max_visits=visits)
        run = await http_run(cl, env, queries=ShapedSource(extra, seed=load.seed))
        us = run.kgserve_cpu_s / run.answered * 1e6 if run.answered else math.nan
        per_request.append(us)
        one_core = 1e6 / us if us else math.nan
        rows.append(
            f"| {label} | {run.mean_bytes:,.0f} | {run.answered:,} | {run.kgserve_cpu_s:.2f} | {us:,.0f} "
            f"| {one_core:,.0f} | {one_core / ASSUMED_ENGINE_RPS:.1f}x |"
        )
    modelled = modelled_engine_rps()
    note = (
        f"\nHeadroom = req/s kgserve serves on one core / engine req/s. Against the sim's model of the real target "
        f"(H200, runtime/katago_serving.cfg, maxVisits 50, 256 in flight: {modelled:,.0f} req/s) it is "
        + " and ".join(f"{1e6 / us / modelled:.0f}x" for us in per_request if us and modelled)
        + " (1 KB, 12 KB responses).\n"
    )
    title = (
        "#### kgserve CPU per request (kgserve process only, engines excluded; zero-cost engine, concurrency 32)\n\n"
    )
    return title + "\n".join(rows) + "\n" + note, per_request


def modelled_engine_rps(visits: int = 50, concurrency: int = 256) -> float:
    """The sim's throughput model for runtime/katago_serving.cfg (its stand-in for one H200)."""
    cfg: dict[str, str | int] = dict(read_cfg(sim_settings(1).engine.cfg))
    return predict_throughput(cfg, visits, concurrency)


SMALL_CFG = {
    "numAnalysisThreads": 8,
    "numSearchThreadsPerAnalysisThread": 1,
    "nnMaxBatchSize": 8,
    "numNNServerThreadsPerModel": 1,
}


def cfg_with(base: Path, overrides: dict[str, int], directory: Path) -> Path:
    """A copy of the KataGo cfg ``base`` with ``key = value`` lines replaced (or appended)."""
    text = base.read_text(encoding="utf-8")
    for key, value in overrides.items():
        line = f"{key} = {value}"
        text, n = re.subn(rf"^\s*{re.escape(key)}\s*=.*$", line, text, flags=re.MULTILINE)
        if n == 0:
            text += f"\n{line}\n"
    path = directory / "pool_bench.cfg"
    path.write_text(text, encoding="utf-8")
    return path


async def pool_section(
    load: LoadSettings, sizes: tuple[int, ...], speed: float, visits: int, overrides: dict[str, int] | None
) -> str:
    pl = replace(load, concurrency=(64,), max_visits=visits)
    rows = [
        "| engines | req/s | visits/s | p50 ms | p99 ms | speed-up vs 1 | notes |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    base = None
    with tempfile.TemporaryDirectory(prefix="kgbench-pool-") as tmp:
        settings = sim_settings(1)
        cfg = cfg_with(settings.engine.cfg, overrides or {}, Path(tmp))
        for n in sizes:
            env = sim_env(None, device=f"pool{os.getpid()}-{n}-{len(overrides or {})}", KGSERVE_SIM_SPEED=f"{speed:g}")
            run = await http_run(pl, env, processes=n, queries=ShapedSource({}, seed=load.seed), cfg=cfg)
            h = _head(run.result)
            base = base or h.req_per_s
            rows.append(
                f"| {n} | {h.req_per_s:,.1f} | {h.visits_per_s:,.0f} | {_ms(h.p50_ms)} | {_ms(h.p99_ms)} "
                f"| {h.req_per_s / base:.2f}x | {_flag(run.result)} |"
            )
    what = ", ".join(f"{k}={v}" for k, v in (overrides or {}).items()) or "runtime/katago_serving.cfg as is"
    title = (
        f"#### Engine pool on one shared simulated device ({what}; sim throughput model, "
        f"KGSERVE_SIM_SPEED={speed:g}, maxVisits {visits}, concurrency 64, through kgserve)\n\n"
    )
    return title + "\n".join(rows) + "\n"


async def suite(args: argparse.Namespace) -> str:
    load = QUICK_LOAD if args.quick else BASE_LOAD
    started = time.monotonic()
    parts = [f"### kgserve serving benchmark\n\n{machine_line()}\n"]
    ratio_table, _ = await ratio_section(load, tuple(args.rates))
    parts.append(ratio_table)
    parts.append(await zero_cost_section(load))
    cpu_table, _ = await cpu_section(load)
    parts.append(cpu_table)
    parts.append(await pool_section(load, tuple(args.pool), args.pool_speed, args.pool_visits, SMALL_CFG))
    parts.append(await pool_section(load, tuple(args.pool), args.pool_speed, args.pool_visits, None))
    parts.append(f"Suite wall time: {time.monotonic() - started:.0f} s.\n")
    return "\n".join(parts)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.serving", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="short windows (smoke test), figures are rough")
    p.add_argument("--rates", type=float, nargs="+", default=[100.0, 500.0, 2000.0])
    p.add_argument("--pool", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--pool-speed", type=float, default=1.0, help="KGSERVE_SIM_SPEED of the pool section")
    p.add_argument("--pool-visits", type=int, default=50)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    print(run_on_sim(suite(parse_args(argv))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
