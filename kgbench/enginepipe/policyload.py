"""Bulk policy load (maxVisits 1, includePolicy + includeOwnership, distinct 19x19 positions) on one host.

Answers issue 14's question "how does one kgserve process's capacity compare with the engine's" with a real
engine, and writes Markdown tables:

1. the analysis engine alone over its stdin pipe (``kgbench.enginepipe.engineload``), one row per engine cfg;
2. the same engine behind one kgserve process, loaded over HTTP by several load-generator processes at once
   (one Python client process cannot read thousands of ~15 KB responses a second);
3. kgserve's own ceiling with the zero-cost sim engine (``KGSERVE_SIM_FIXED_RPS=0``), and the same with 1, 2
   and 4 independent kgserve processes (each its own port and engine, the clients split between them): an
   upper bound for what several front ends could add, not a multi-front-end mode of kgserve.

``--kgserve LABEL=PYTHONPATH`` (repeatable) runs the kgserve rows once per source tree (e.g. main and a
branch), so a hot-path change is measured on the same machine in the same run. Run it from a folder without a
``kgserve`` package: ``python -m kgserve`` puts its working folder ahead of PYTHONPATH.

    python -m kgbench.enginepipe.policyload --bin KATAGO --model NET --out DIR [--cfg 64:64:2 --cfg 256:256:4 ...]

Every load is bounded: a fixed number of queries (engine alone) or a fixed number of windows (HTTP).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import multiprocessing
import os
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psutil

from kgbench.enginepipe.engineload import EngineLoadResult, nineteen_by_nineteen, run_engine_load
from kgbench.load.generator import run_load_sync
from kgbench.load.traffic import ShapedSource
from kgbench.load.types import LoadSettings
from kgbench.targets.kgserve_process import engine_pids, kgserve_running
from kgbench.targets.sim import cleanup_devices, sim_env, sim_settings
from kgbench.track.machine import machine_line
from kgserve.settings import Settings, load_settings

POLICY_EXTRA: dict[str, Any] = {"includePolicy": True, "includeOwnership": True}
# fixed length (min_windows == max_windows) so that the client processes measure over the same span
CLIENT_LOAD = LoadSettings(
    concurrency=(64,),
    warmup_s=2.0,
    window_s=2.0,
    min_windows=3,
    max_windows=3,
    tolerance=1.0,
    max_visits=1,
    request_timeout_s=60.0,
)


@dataclass(frozen=True)
class EngineCfg:
    threads: int  # numAnalysisThreads
    batch: int  # nnMaxBatchSize
    servers: int  # numNNServerThreadsPerModel

    @classmethod
    def parse(cls, text: str) -> EngineCfg:
        parts = text.split(":")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise argparse.ArgumentTypeError(f"cfg must be THREADS:BATCH:SERVERS (positive ints), got {text!r}")
        return cls(int(parts[0]), int(parts[1]), int(parts[2]))

    @property
    def label(self) -> str:
        return f"{self.threads} / {self.batch} / {self.servers}"

    def write(self, directory: Path) -> Path:
        # nnCache small on purpose: repeated positions (after one pass over the 13,320) must not hit it
        text = (
            f"numAnalysisThreads = {self.threads}\nnumSearchThreadsPerAnalysisThread = 1\n"
            f"nnMaxBatchSize = {self.batch}\nnumNNServerThreadsPerModel = {self.servers}\n"
            "nnCacheSizePowerOfTwo = 10\nnnMutexPoolSizePowerOfTwo = 12\nreportAnalysisWinratesAs = BLACK\n"
            "logToStderr = true\nlogAllRequests = false\nlogAllResponses = false\n"
        )
        path = directory / f"policy_{self.threads}_{self.batch}_{self.servers}.cfg"
        path.write_text(text, encoding="utf-8")
        return path


@dataclass(frozen=True)
class HttpFigures:
    req_per_s: float  # sum over the client processes
    p50_ms: float  # median of the clients' p50
    p99_ms: float  # worst client p99
    errors: int
    server_cores: float  # kgserve processes' CPU seconds / wall seconds over the load
    engine_cores: float
    client_cpu_max: float  # the busiest client process's own CPU share (1.0 = one core)
    mean_bytes: float  # response body bytes, mean over the successful requests of the first client
    flags: str


def _client(url: str, load: LoadSettings, seed: int) -> dict[str, Any]:
    """One load-generator process: its headline and self-watch (runs in a spawned process)."""
    result = run_load_sync(url, replace(load, seed=seed), ShapedSource(POLICY_EXTRA, seed=seed))
    head = result.headline()
    watch = result.selfwatch
    ok = [r.bytes for r in result.records if r.status == 200]
    return {
        "bytes": sum(ok) / len(ok) if ok else math.nan,
        "req_per_s": head.req_per_s if head else 0.0,
        "p50_ms": head.p50_ms if head else math.nan,
        "p99_ms": head.p99_ms if head else math.nan,
        "errors": head.errors if head else 0,
        "cpu_share": watch.cpu_share if watch else math.nan,
        "invalid": result.invalid_reason or "",
    }


def _cpu(pids: Sequence[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def load_http(urls: Sequence[str], server_pids: Sequence[int], engines: Sequence[int], clients: int) -> HttpFigures:
    """``clients`` load-generator processes (64 in flight each), spread over ``urls``, all started together."""
    ctx = multiprocessing.get_context("spawn")
    server0, engine0, wall0 = _cpu(server_pids), _cpu(engines), time.monotonic()
    with ctx.Pool(clients) as pool:
        results = pool.starmap(_client, [(urls[i % len(urls)], CLIENT_LOAD, i) for i in range(clients)])
    wall = time.monotonic() - wall0
    flags = sorted({r["invalid"] for r in results if r["invalid"]})
    return HttpFigures(
        req_per_s=sum(r["req_per_s"] for r in results),
        p50_ms=sorted(r["p50_ms"] for r in results)[len(results) // 2],
        p99_ms=max(r["p99_ms"] for r in results),
        errors=sum(r["errors"] for r in results),
        server_cores=(_cpu(server_pids) - server0) / wall,
        engine_cores=(_cpu(engines) - engine0) / wall,
        client_cpu_max=max(r["cpu_share"] for r in results),
        mean_bytes=results[0]["bytes"],
        flags="; ".join(flags) or "ok",
    )


def real_settings(binary: Path, model: Path, cfg: Path, home: Path) -> Settings:
    """runtime/config.yaml with the cuda backend pointed at ``binary``, ``model`` and ``cfg``; loopback, port 0."""
    settings = load_settings(None).with_overrides(backend="cuda", port=0, host="127.0.0.1")
    backends = dict(settings.engine.backends)
    backends["cuda"] = backends["cuda"].model_copy(update={"command": [str(binary)]})
    engine = settings.engine.model_copy(
        update={"backends": backends, "model": model, "cfg": cfg, "home_data_dir": home, "processes": 1}
    )
    return settings.model_copy(update={"engine": engine})


def _tree_env(base: Mapping[str, str], tree: str) -> dict[str, str]:
    """``base`` with ``tree`` first on PYTHONPATH: its kgserve shadows this one; the rest (packages) stays."""
    rest = base.get("PYTHONPATH", "")
    return {**base, "PYTHONPATH": f"{tree}{os.pathsep}{rest}" if rest else tree}


async def _engines_at_once(argvs: Sequence[list[str]], queries: int, in_flight: int) -> list[EngineLoadResult]:
    # copies of one engine side by side, each its own closed loop and position stream (seeds differ)
    return list(
        await asyncio.gather(
            *(
                run_engine_load(
                    argv, nineteen_by_nineteen(i), visits=1, queries=queries, concurrency=in_flight, extra=POLICY_EXTRA
                )
                for i, argv in enumerate(argvs)
            )
        )
    )


def engine_rows(
    binary: Path, model: Path, runs: Sequence[tuple[EngineCfg, int]], queries: int, work: Path
) -> list[str]:
    """One row per (cfg, copies): ``copies`` engine processes loaded at once, their req/s summed."""
    rows = [
        "| numAnalysisThreads / nnMaxBatchSize / server threads | processes | in flight (each) | queries (each) "
        "| req/s (sum) | NN avg batch | engine cores (sum) | client CPU share |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for cfg, copies in runs:
        argv = [str(binary), "analysis", "-config", str(cfg.write(work)), "-model", str(model)]
        in_flight = 2 * cfg.threads
        cpu0, wall0 = time.process_time(), time.monotonic()
        results = asyncio.run(_engines_at_once([argv] * copies, queries, in_flight))
        client = (time.process_time() - cpu0) / (time.monotonic() - wall0)
        batch = sum(r.nn_avg_batch for r in results) / len(results)
        rows.append(
            f"| {cfg.label} | {copies} | {in_flight} | {queries:,} | {sum(r.req_per_s for r in results):,.0f} "
            f"| {batch:.1f} | {sum(r.cores_used for r in results):.1f} | {client:.2f} |"
        )
        print(rows[-1], flush=True)
    return rows


def _http_row(label: str, what: str, f: HttpFigures) -> str:
    return (
        f"| {label} | {what} | {f.req_per_s:,.0f} | {f.p50_ms:.0f} / {f.p99_ms:.0f} | {f.errors} "
        f"| {f.server_cores:.2f} | {f.engine_cores:.1f} | {f.client_cpu_max:.2f} | {f.mean_bytes:,.0f} | {f.flags} |"
    )


HTTP_HEAD = [
    "| kgserve tree | engine | req/s | p50 / p99 ms | errors | kgserve cores | engine cores | busiest client CPU "
    "| mean bytes | notes |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
]


def _with_processes(settings: Settings, processes: int) -> Settings:
    return settings.model_copy(update={"engine": settings.engine.model_copy(update={"processes": processes})})


def zero_cost_sims(processes: int, work: Path) -> Settings:
    """``processes`` sims with the serving cfg but nnMaxBatchSize 8: the sim models GPU memory, and six copies of
    the serving cfg's batch (25 GB each) do not fit its H200; at zero cost the batch size changes nothing else."""
    settings = sim_settings(processes)
    text = settings.engine.cfg.read_text(encoding="utf-8")
    cfg = work / "sim_small_batch.cfg"
    cfg.write_text(re.sub(r"(?m)^nnMaxBatchSize\s*=.*$", "nnMaxBatchSize = 8", text), encoding="utf-8")
    return settings.model_copy(update={"engine": settings.engine.model_copy(update={"cfg": cfg})})


def _measure(settings: Settings, env: Mapping[str, str], clients: int) -> HttpFigures:
    with kgserve_running(settings, env, ready_timeout_s=300) as proc:
        assert proc.url is not None and proc.proc is not None
        return load_http([proc.url], [proc.proc.pid], engine_pids(proc), clients)


def kgserve_rows(
    trees: Mapping[str, str],
    real: Settings,
    pools: Sequence[int],
    sims: int,
    clients: int,
    cfg_label: str,
    work: Path,
) -> list[str]:
    """Per tree: one kgserve with a pool of each size in ``pools`` of real engines, then with ``sims`` zero-cost sims
    (the sim answers a policy query with ~2 ms of its own CPU, so one sim cannot show kgserve's ceiling)."""
    rows = list(HTTP_HEAD)
    for label, path in trees.items():
        for n in pools:
            f = _measure(_with_processes(real, n), _tree_env(os.environ, path), clients)
            rows.append(_http_row(label, f"{n} x KataGo {cfg_label}", f))
            print(rows[-1], flush=True)
        f = _measure(zero_cost_sims(sims, work), _tree_env(sim_env(0, device=f"pl-{label}"), path), clients)
        rows.append(_http_row(label, f"{sims} x sim, zero cost", f))
        print(rows[-1], flush=True)
    cleanup_devices()
    return rows


def frontend_rows(label: str, path: str, counts: Sequence[int], sims: int, clients: int, work: Path) -> list[str]:
    """1, 2, 4 independent kgserve stacks sharing ``sims`` zero-cost sims between them, the clients split."""
    rows = [HTTP_HEAD[0].replace("kgserve tree", "kgserve processes"), HTTP_HEAD[1]]
    for n in counts:
        each = max(1, sims // n)
        stacks = [
            kgserve_running(zero_cost_sims(each, work), _tree_env(sim_env(0, device=f"fe{n}-{i}"), path))
            for i in range(n)
        ]
        procs = [s.__enter__() for s in stacks]
        try:
            urls = [p.url for p in procs if p.url is not None]
            servers = [p.proc.pid for p in procs if p.proc is not None]
            engines = [pid for p in procs for pid in engine_pids(p)]
            f = load_http(urls, servers, engines, max(clients, 2 * n))
        finally:
            for s in reversed(stacks):
                s.__exit__(None, None, None)
        rows.append(_http_row(f"{n} ({label})", f"{n} x {each} sims, zero cost", f))
        print(rows[-1], flush=True)
    cleanup_devices()
    return rows


def _ints(text: str) -> list[int]:
    return [int(n) for n in text.split(",") if n.strip()]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", type=Path, required=True, help="KataGo binary")
    p.add_argument("--model", type=Path, required=True, help="KataGo network")
    p.add_argument("--out", type=Path, required=True, help="folder for policyload.md")
    p.add_argument("--cfg", type=EngineCfg.parse, action="append", help="THREADS:BATCH:SERVERS (repeatable)")
    p.add_argument("--pool-cfg", type=EngineCfg.parse, help="cfg of the engine pools (default: the first --cfg)")
    p.add_argument("--pools", default="1,2", help="engine processes: alone side by side, and behind one kgserve")
    p.add_argument("--sims", type=int, default=6, help="zero-cost sim processes behind kgserve")
    p.add_argument("--queries", type=int, default=12_000, help="queries per engine-alone run (of 13,320 distinct)")
    p.add_argument("--clients", type=int, default=6, help="load-generator processes, 64 in flight each")
    p.add_argument("--kgserve", action="append", default=[], help="LABEL=PYTHONPATH of a kgserve source tree")
    p.add_argument("--frontends", default="1,2,4", help="independent kgserve processes to compare ('' = skip)")
    args = p.parse_args(argv)
    if args.kgserve and (Path.cwd() / "kgserve").is_dir():
        p.error("--kgserve needs a working folder without a kgserve package (it would shadow the trees)")
    cfgs: list[EngineCfg] = args.cfg or [EngineCfg(32, 64, 2)]
    pool_cfg: EngineCfg = args.pool_cfg or cfgs[0]
    pools = _ints(args.pools)
    trees = dict(t.split("=", 1) for t in args.kgserve) or {"this": os.environ.get("PYTHONPATH", os.getcwd())}
    args.out.mkdir(parents=True, exist_ok=True)
    out: list[str] = [f"_{machine_line('load generator included, loopback')}_", ""]
    report = args.out / "policyload.md"
    with tempfile.TemporaryDirectory(prefix="kgbench-policy-") as tmp:
        work = Path(tmp)
        runs = [(c, 1) for c in cfgs] + [(pool_cfg, n) for n in pools if n > 1]
        out += ["#### Engine alone (stdin pipe)", "", *engine_rows(args.bin, args.model, runs, args.queries, work), ""]
        report.write_text("\n".join(out) + "\n", encoding="utf-8")
        real = real_settings(args.bin, args.model, pool_cfg.write(work), work / "home")
        rows = kgserve_rows(trees, real, pools, args.sims, args.clients, pool_cfg.label, work)
        out += ["#### One kgserve process", "", *rows]
        report.write_text("\n".join(out) + "\n", encoding="utf-8")
        if args.frontends:
            label, path = list(trees.items())[-1]
            rows = frontend_rows(label, path, _ints(args.frontends), args.sims, args.clients, work)
            out += ["", "#### Independent kgserve processes", "", *rows]
    report.write_text("\n".join(out) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
