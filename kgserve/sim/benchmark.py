"""`python -m kgserve.sim benchmark`: KataGo's `benchmark` command (one position searched at a time with several
numbers of search threads), same output format, timed by the same throughput model as the analysis engine."""

from __future__ import annotations

import math
import random
import sys
import time
from dataclasses import replace

from kgserve.sim.cfgfile import CfgError, SimCfg
from kgserve.sim.model.throughput import SharedDevice, SimParams, benchmark_figures
from kgserve.sim.startup import Knobs, abort, check_memory, check_model, model_names

__all__ = ["benchmark_max_batch", "elo_diff", "run_benchmark"]

DEFAULT_THREADS = "1,2,4,8,16,32,64"


def elo_diff(visits_per_s: float, base_visits_per_s: float, threads: int, seconds: float = 5.0) -> int:
    """KataGo's rough estimate: ~250 Elo per speed doubling, minus a per-thread MCTS cost (7 Elo at 800 visits,
    2 Elo at 5000 visits per move)."""
    gain = 250.0 * math.log2(visits_per_s / base_visits_per_s)
    per_move = max(1.0, visits_per_s * seconds)
    cost_per_thread = max(0.5, 7.0 - 5.0 * math.log(per_move / 800.0) / math.log(5000.0 / 800.0))
    return round(gain - cost_per_thread * (threads - 1))


def benchmark_max_batch(threads: list[int]) -> int:
    """KataGo's benchmark ignores nnMaxBatchSize: every thread count runs with the largest one's batch size,
    rounded up to a multiple of 4, at least 8 (cpp/command/benchmark.cpp, createNNEval)."""
    return max(8, (max(threads, default=1) + 3) // 4 * 4)


def _out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def run_benchmark(cfg: SimCfg, flags: dict[str, str]) -> int:
    model = flags["model"]
    knobs = Knobs.from_env(model)
    try:
        cfg_threads = cfg.require_int("numSearchThreads", 1, 4096)
        visits = int(flags.get("v", flags.get("visits", "800")))
        thread_list = [int(t) for t in flags.get("t", flags.get("threads", DEFAULT_THREADS)).split(",") if t.strip()]
        positions = int(flags.get("n", flags.get("numpositions", "10")))
    except CfgError as err:
        abort(err.kind, err.message)
        return 134
    except ValueError as err:
        sys.stderr.write(f"Error: {err}\n")
        return 1
    stamp = time.strftime("%Y-%m-%d %H:%M:%S+0000", time.gmtime())
    _out(f"{stamp}: Running with following config:\n{cfg.echo()}\n")
    _out(f"{stamp}: Loading model and initializing benchmark...\n")
    _out(f"{stamp}: Testing with default positions for board size: 19\n")
    batch_set = "nnMaxBatchSize" in cfg.values
    if batch_set:
        _out(
            f"WARNING: Your nnMaxBatchSize is hardcoded to {cfg.values['nnMaxBatchSize']}, ignoring it and assuming "
            "it is >= threads, for this benchmark.\n"
        )
    _out(f"{stamp}: nnRandSeed0 = {random.Random(knobs.seed).getrandbits(64)}\n")
    _out(f"{stamp}: After dedups: nnModelFile0 = {model} useFP16 auto\n")
    _out(f"{stamp}: Initializing neural net buffer to be size 19 * 19 exactly\n")
    check_model(model)
    base = SimParams.from_cfg({**cfg.values, "numAnalysisThreads": 1}, knobs.profile)
    max_batch = benchmark_max_batch(thread_list)
    params = [replace(base, search_threads=t, max_batch=max_batch, max_visits=visits) for t in thread_list]
    memory = check_memory(max(params, key=lambda p: p.max_batch), knobs.device)
    _, internal = model_names(model)
    for i in range(base.server_threads):
        _out(f"{stamp}: SIMULATED CUDA backend thread {i}: Model version 15\n")
        _out(f"{stamp}: SIMULATED CUDA backend thread {i}: Model name: {internal} (SIMULATED)\n")
    _out(f"\n{stamp}: Loaded config {cfg.file_name}\n{stamp}: Loaded model {model}\n\n")
    _out(f"Testing using {visits} visits.\n\n")
    _out("You are using kgserve's SIMULATED KataGo: no neural net is evaluated, the timings come from a model.\n\n")
    _out(f"Your GTP config is currently set to use numSearchThreads = {cfg_threads}\n")
    _out("Testing different numbers of threads (board size 19x19): \n")
    try:
        return _run_threads(cfg, params, positions, visits, knobs, stamp, batch_set)
    finally:
        memory.free()


def _run_threads(
    cfg: SimCfg,
    params: list[SimParams],
    positions: int,
    visits: int,
    knobs: Knobs,
    stamp: str,
    batch_set: bool,
) -> int:
    server_threads = params[0].server_threads
    device = SharedDevice(knobs.device)
    results: list[tuple[int, float]] = []
    total_rows = total_batches = 0.0
    for p in params:
        figures = benchmark_figures(p, visits)
        per_position = figures.per_position_s
        head = f"numSearchThreads = {p.search_threads:2d}"
        _out(f"\r{head}: 0 / {positions} positions, visits/s = -nan (0.0 secs)      ")
        elapsed = 0.0
        for k in range(1, positions + 1):
            jitter = 1.0 + 0.02 * math.sin(k * 12.9898 + p.search_threads)
            wall = per_position * jitter / knobs.speed
            _, dev_end = device.reserve(figures.device_util * wall)
            time.sleep(max(wall, dev_end - time.time()))
            elapsed += per_position * jitter
            if k < positions:
                progress = f"visits/s = {k * visits / elapsed:.2f} ({elapsed:.1f} secs)      "
                _out(f"\r{head}: {k} / {positions} positions, {progress}")
        rows = figures.evals_per_s
        batches = rows / max(1.0, figures.batch)
        total_rows += rows * elapsed
        total_batches += batches * elapsed
        rate = positions * visits / elapsed
        results.append((p.search_threads, rate))
        elo = "baseline" if len(results) == 1 else f"{elo_diff(rate, results[0][1], p.search_threads):+d}"
        _out(
            f"\r{head}: {positions} / {positions} positions, visits/s = {rate:.2f} nnEvals/s = {rows:.2f} "
            f"nnBatches/s = {batches:.2f} avgBatchSize = {rows / max(batches, 1e-9):.2f} ({elapsed:.1f} secs) "
            f"(EloDiff {elo})\n"
        )
    _out("\n\nBased on some test data, each speed doubling gains perhaps ~250 Elo by searching deeper.\n")
    _out(
        "Based on some test data, each thread costs perhaps 7 Elo if using 800 visits, and 2 Elo if using 5000 "
        "visits (by making MCTS worse).\n"
    )
    _out("So APPROXIMATELY based on this benchmark, if you intend to do a 5 second search: \n")
    elos = [0] + [elo_diff(rate, results[0][1], t) for t, rate in results[1:]]
    best = max(range(len(results)), key=lambda i: elos[i])
    for i, (t, _) in enumerate(results):
        text = "(baseline)" if i == 0 else f" {elos[i]:+d} Elo"
        _out(f"numSearchThreads = {t:2d}: {text}{' (recommended)' if i == best else ''}\n")
    _out(
        f"\nIf you care about performance, you may want to edit numSearchThreads in {cfg.file_name} based on the "
        "above results!\n"
    )
    if batch_set:
        _out(
            f"WARNING: Your nnMaxBatchSize is hardcoded to {cfg.values['nnMaxBatchSize']}, recommend deleting it and "
            "using the default (which this benchmark assumes)\n"
        )
    _out(
        "If you intend to do much longer searches, configure the seconds per game move you expect with the '-time' "
        "flag and benchmark again.\n"
    )
    _out(
        "If you intend to do short or fixed-visit searches, use lower numSearchThreads for better strength, high "
        "threads will weaken strength.\n"
    )
    _out(f"If interested see also other notes about performance and mem usage in the top of {cfg.file_name}\n\n")
    for i in range(server_threads):
        _out(
            f"{stamp}: GPU {i} finishing, processed {round(total_rows / server_threads)} rows "
            f"{round(total_batches / server_threads)} batches\n"
        )
    return 0
