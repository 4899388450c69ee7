"""The qualification's kgbench runs: `katago benchmark` over search threads, the user's line, a wider sweep
around its best job aimed at its bottleneck, and promote of the best run into the results folder's runtime."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from mlflow.entities import Run

from kgbench.decide import runs as runlib
from kgbench.decide.baseline import baseline_text
from kgbench.decide.selection import choose_winner
from kgbench.qualify.context import Qualification
from kgbench.qualify.runner import StepFailed, StepRecord, run_command
from kgbench.track.schema import BOTTLENECK, BOTTLENECK_FIGURES, BOTTLENECK_KNOB, FAILURE_REASON, HYDRA_OVERRIDES
from kgbench.track.summary import sweep_table

__all__ = ["engine_benchmark", "promote_best", "user_line", "wide_axes", "wide_sweep"]

# what the sweep table shows per job in the results (column of kgbench.track.summary -> results key)
_JOB_COLUMNS = {
    "req/s": "req_per_s",
    "p99 ms": "p99_ms",
    "evals/s": "nn_evals_per_s",
    "MFU": "mfu",
    "J/an": "gpu_j_per_analysis",
    "GPU %": "gpu_busy_pct",
    "host %": "host_cpu_pct",
    "batch": "nn_avg_batch",
}


def _load_overrides(q: Qualification) -> list[str]:
    out = []
    for key, value in q.options.scale.load.items():
        text = "[" + ",".join(str(v) for v in value) + "]" if isinstance(value, list) else str(value)
        out.append(f"load.{key}={text}")
    return out


def _kgbench(q: Qualification, step: str, args: Sequence[str], timeout_s: float) -> str:
    # a qualification works to a time budget and picks its own next sweep: its sweeps do not race their contenders
    argv = [q.python, "-m", "kgbench", *args, f"runtime_config={q.runtime_config}", "race.enabled=false"]
    done = run_command(argv, q.log(step), timeout_s, q.env())
    if done.returncode not in (0, 1):  # 1: some jobs failed (each is in the table with its reason)
        tail = [line for line in done.stdout.strip().splitlines() if line.strip()][-1:] or ["no output"]
        raise StepFailed(f"python -m kgbench exited {done.returncode}: {tail[0][:300]} (see {q.log(step)})")
    return done.stdout


def engine_benchmark(q: Qualification, record: StepRecord) -> str:
    """`katago benchmark` over the scale's search threads; a net that runs out of GPU memory at the largest batch
    (a transformer's per-batch-size graphs can) is tried again with half the batch, and the record says so."""
    scale = q.options.scale
    batch = max(scale.bench_threads[-1], max(scale.line_batches))
    while True:
        threads = "[" + ",".join(str(t) for t in scale.bench_threads if t <= batch) + "]"
        args = [
            "mode=engine",
            f"backend={q.options.backend}",
            f"engine_bench.threads={threads}",
            f"engine_bench.visits={scale.bench_visits}",
            f"engine_bench.positions={scale.bench_positions}",
            f"nnMaxBatchSize={batch}",
            f"numNNServerThreadsPerModel={scale.threads['numNNServerThreadsPerModel']}",
            f"hydra.run.dir={q.out / 'hydra' / f'benchmark-{batch}'}",
        ]
        log = _kgbench(q, "benchmark", args, q.budget.share(0.12, 90))
        if "out of memory" not in log or batch <= 16:
            break
        record.data.setdefault("out_of_memory_at_batch", []).append(batch)
        batch //= 2
    record.data["nnMaxBatchSize"] = batch
    client = runlib.make_client(q.tracking_uri)
    found = client.search_runs(
        [e.experiment_id for e in client.search_experiments()],
        "tags.mode = 'engine'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    if not found or found[0].info.status != "FINISHED":
        reason = found[0].data.tags.get(FAILURE_REASON, "") if found else "no run recorded"
        raise StepFailed(f"katago benchmark failed: {reason}")
    run = found[0]
    series: dict[int, dict[str, float]] = {}
    for key in ("bench_visits_per_s", "bench_nn_evals_per_s", "bench_avg_batch_size"):
        for point in client.get_metric_history(run.info.run_id, key):
            series.setdefault(int(point.step), {})[key.removeprefix("bench_")] = point.value
    record.data.update(run_id=run.info.run_id, metrics=dict(run.data.metrics), series=series)
    best = max(series.items(), key=lambda item: item[1].get("nn_evals_per_s", 0.0), default=None)
    if best is None:
        return "no figures"
    threads_best, figures = best
    mfu = _mfu(q, figures.get("nn_evals_per_s"))
    record.data["best"] = {"threads": threads_best, **figures, **({"mfu": mfu} if mfu is not None else {})}
    return (
        f"best {figures.get('nn_evals_per_s', math.nan):,.0f} NN evals/s at {threads_best} threads "
        f"(batch {figures.get('avg_batch_size', math.nan):.1f})" + (f", MFU {mfu:.2f}" if mfu is not None else "")
    )


def _mfu(q: Qualification, evals_per_s: float | None) -> float | None:
    if not evals_per_s or q.net is None or q.gemm is None or not q.gemm.tflops:
        return None
    return evals_per_s * q.net.flops() / (q.gemm.tflops * 1e12)


def _sweep_rows(q: Qualification, label_keys: Sequence[str] = ()) -> tuple[Run, list[Run], list[dict[str, Any]]]:
    client = runlib.make_client(q.tracking_uri)
    parent = runlib.find_sweep(client, None, None)
    children = runlib.sweep_children(client, parent)
    table = sweep_table(children)
    by_id = {run.info.run_id: run for run in children}
    swept = list(label_keys) or runlib.swept_keys(children)
    rows = []
    for _, row in table.iterrows():
        run = by_id[row["run_id"]]
        label = runlib.label_of(run, swept) or row["job"]
        item: dict[str, Any] = {"job": label, "status": row["status"], "run_id": row["run_id"]}
        for column, key in _JOB_COLUMNS.items():
            value = row.get(column)
            if value is not None and isinstance(value, float) and math.isfinite(value):
                item[key] = value
        for key in ("req_per_s_ci_low", "req_per_s_ci_high"):  # the 95% interval of req/s, where measured
            if math.isfinite(value := run.data.metrics.get(key, math.nan)):
                item[key] = value
        item["bottleneck"] = run.data.tags.get(BOTTLENECK, "")
        item["bottleneck_figures"] = run.data.tags.get(BOTTLENECK_FIGURES, "")
        item["knob"] = run.data.tags.get(BOTTLENECK_KNOB, "")
        item["reason"] = row.get("reason", "")
        item["cfg"] = {k.removeprefix("katago."): v for k, v in run.data.params.items() if k.startswith("katago.")}
        rows.append(item)
    return parent, children, rows


def user_line(q: Qualification, record: StepRecord) -> str:
    """The user's own line, `python -m kgbench -m backend=cuda,trt nnMaxBatchSize=64,128,256`, with this build as
    its backend and the backends that cannot run here left out (and said so)."""
    scale = q.options.scale
    batches = ",".join(str(b) for b in scale.line_batches)
    threads = [f"{key}={value}" for key, value in scale.threads.items()]
    args = ["-m", f"backend={','.join(q.backends)}", f"nnMaxBatchSize={batches}", *threads, *_load_overrides(q)]
    args.append(f"hydra.sweep.dir={q.out / 'hydra' / 'line'}")
    _kgbench(q, "line", args, q.budget.share(0.33, 120))
    parent, _, rows = _sweep_rows(q)
    record.data.update(sweep=runlib.sweep_id_of(parent), jobs=rows, skipped_backends=q.skipped_backends)
    done = [row for row in rows if row["status"] == "FINISHED" and "req_per_s" in row]
    if not done:
        raise StepFailed(f"no job of the line finished: {[row['reason'] for row in rows][:3]}")
    best = done[0]
    return f"{len(done)} of {len(rows)} jobs finished; best {best['job']}: {best['req_per_s']:.1f} req/s, " + (
        f"bottleneck {best['bottleneck']}" if best["bottleneck"] else "no bottleneck figures"
    )


def wide_axes(bottleneck: str, cfg: dict[str, str], jobs: int) -> tuple[str, list[int]]:
    """The wider sweep: one knob, the one the line's best job's bottleneck names, at `jobs` values around it."""
    analysis = int(cfg.get("numAnalysisThreads", 64))
    search = int(cfg.get("numSearchThreadsPerAnalysisThread", 2))
    servers = int(cfg.get("numNNServerThreadsPerModel", 2))
    if bottleneck in ("gpu", "kernels"):  # the device is busy: how many server threads (CUDA streams) feed it
        key, values = "numNNServerThreadsPerModel", [max(1, servers // 2), servers * 2, servers * 4]
    elif bottleneck in ("host", "frontend"):  # the cores are busy: fewer search threads per position
        key, values = "numSearchThreadsPerAnalysisThread", [max(1, search // 2), max(1, search // 4), search * 2]
    else:  # batching: the GPU waits for work: more positions in flight
        key, values = "numAnalysisThreads", [analysis * 2, analysis * 4, max(1, analysis // 2)]
    current = {"numNNServerThreadsPerModel": servers, "numSearchThreadsPerAnalysisThread": search}.get(key, analysis)
    unique = [v for i, v in enumerate(values) if v != current and v not in values[:i]]
    return key, unique[:jobs]


def wide_sweep(q: Qualification, record: StepRecord) -> str:
    line = next((r for r in q.records if r.name == "line"), None)
    jobs = [row for row in (line.data.get("jobs", []) if line else []) if "req_per_s" in row]
    if not jobs:
        raise StepFailed("the line measured nothing to widen")
    best = jobs[0]
    key, values = wide_axes(best["bottleneck"], best["cfg"], q.options.scale.wide_jobs)
    record.data.update(around=best["job"], bottleneck=best["bottleneck"], knob=best["knob"], key=key, values=values)
    if not values:
        record.status = "skipped"
        return f"nothing to vary ({key} is already at its only value)"
    fixed = {k: best["cfg"][k] for k in ("nnMaxBatchSize", *q.options.scale.threads) if k != key and k in best["cfg"]}
    args = ["-m", f"backend={q.options.backend}", f"{key}={','.join(str(v) for v in values)}"]
    args += [f"{k}={v}" for k, v in fixed.items()]
    args += [*_load_overrides(q), f"hydra.sweep.dir={q.out / 'hydra' / 'wide'}"]
    _kgbench(q, "wide", args, q.budget.share(0.22, 90))
    parent, _, rows = _sweep_rows(q, [f"katago.{key}"])
    record.data.update(sweep=runlib.sweep_id_of(parent), jobs=rows)
    done = [row for row in rows if row["status"] == "FINISHED" and "req_per_s" in row]
    top = done[0] if done else None
    better = top is not None and top["req_per_s"] > best["req_per_s"]
    return f"{len(done)} of {len(rows)} jobs finished, {key} in {values} ({best['bottleneck'] or '?'}-bound); " + (
        f"better: {top['job']} {top['req_per_s']:.1f} req/s" if better and top else "none beat the line's best"
    )


def promote_best(q: Qualification, record: StepRecord) -> str:
    """The best run of both sweeps by promote's own rule, promoted into the results folder's runtime."""
    client = runlib.make_client(q.tracking_uri)
    runs = []
    for step in ("line", "wide"):
        found = next((r for r in q.records if r.name == step and r.data.get("sweep")), None)
        if found is not None:
            runs += runlib.sweep_children(client, runlib.find_sweep(client, None, found.data["sweep"]))
    selection = choose_winner(runlib.candidates(runs), allow_simulated=True, allow_synthetic=True)
    if selection.winner is None:
        raise StepFailed("no run of the sweeps satisfies promote's rule (errors, instability or failures)")
    winner = selection.winner
    argv = [q.python, "-m", "kgbench.promote", "--tracking-uri", q.tracking_uri, "--config", str(q.runtime_config)]
    argv += ["--runtime-dir", str(q.scratch_dir), "--run", winner.run_id, "--allow-simulated", "--allow-synthetic"]
    done = run_command(argv, q.log("promote"), q.budget.share(0.03, 60), q.env())
    if done.returncode != 0:
        raise StepFailed(f"promote exited {done.returncode} (see {q.log('promote')})")
    run = client.get_run(winner.run_id)
    q.best = {
        "run_id": winner.run_id,
        "label": winner.label or run.data.tags.get(HYDRA_OVERRIDES, ""),
        "cfg": {k.removeprefix("katago."): v for k, v in run.data.params.items() if k.startswith("katago.")},
        "metrics": dict(run.data.metrics),
        "bottleneck": run.data.tags.get(BOTTLENECK, ""),
        "bottleneck_figures": run.data.tags.get(BOTTLENECK_FIGURES, ""),
        "knob": run.data.tags.get(BOTTLENECK_KNOB, ""),
        "decision": selection.decision.explanation if selection.decision else "",
        "baseline": baseline_text(run),
    }
    record.data.update(q.best, config=str(q.scratch_dir / "config.yaml"))
    return f"run {winner.run_id[:8]} {q.best['label']}: {winner.req_per_s or math.nan:.1f} req/s -> {q.scratch_dir}"
