"""What a GPU calibration fits to: measured points read from a device run's JSON lines or from a kgbench sweep.

Three kinds of point:

* ``BenchPoint``: one thread count of ``katago benchmark`` (one position at a time, ``threads`` search threads):
  NN evals/s, visits/s and the average NN batch. KataGo's benchmark ignores nnMaxBatchSize and sizes every
  thread count's batch for the series' largest (``kgserve.sim.benchmark.benchmark_max_batch``).
* ``LoadPoint``: a closed-loop load on the analysis engine (``visits`` per query, ``concurrency`` in flight):
  req/s, and where known the NN average batch and the engine's cores.
* ``MemoryPoint``: the device memory a run held at its peak (NVML) for its server threads and batch size.

Sources: ``read_qualification`` (a qualification's results.json, ``python -m kgbench.qualify``), ``read_job_export``
(the jobs of several qualifications as MLflow recorded them, docs/data/gpu-h100-2026-11-25/mlflow-jobs.json: only
their device-memory peaks, their loads being in each results.json), ``read_jsonl`` (the
JSON lines a device run writes, docs/data/gpu-h100-2026-11-25/run1/results.jsonl:
``kind`` ``benchmark`` with a per-thread ``series``, ``kind`` ``engineload`` with its ``result``; lines with an
``error`` are skipped) and ``read_sweep`` (a kgbench sweep in MLflow: engine-mode jobs give bench points, load jobs
one load point per concurrency level; simulated, failed and multi-engine jobs are skipped).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.calibration.grid import Point
from kgbench.decide.runs import DEFAULT_EXPERIMENT, find_sweep, make_client, sweep_children
from kgserve.sim.benchmark import benchmark_max_batch

__all__ = [
    "BenchPoint",
    "LoadPoint",
    "Measurements",
    "MemoryPoint",
    "read_data",
    "read_job_export",
    "read_jsonl",
    "read_qualification",
    "read_sweep",
]


@dataclass(frozen=True)
class BenchPoint:
    threads: int
    server_threads: int
    max_batch: int
    visits: int
    evals_per_s: float
    visits_per_s: float
    batch: float
    source: str = ""

    @property
    def label(self) -> str:
        return f"benchmark {self.threads} threads, s{self.server_threads} b{self.max_batch}"


@dataclass(frozen=True)
class LoadPoint:
    analysis_threads: int
    search_threads: int
    max_batch: int
    server_threads: int
    visits: int
    concurrency: int
    req_per_s: float
    batch: float = 0.0  # 0: not measured
    cores: float = 0.0  # the engine's CPU cores while measured; 0: not measured
    source: str = ""
    path: str = ""  # how the load reached the engine, when a run measured several ways (kgserve, engine pipe)

    @property
    def label(self) -> str:
        via = f" ({self.path}, {self.concurrency} in flight)" if self.path else ""
        return (
            f"load {self.analysis_threads}x{self.search_threads} b{self.max_batch} s{self.server_threads}, "
            f"{self.visits} visits{via}"
        )

    def cfg(self) -> dict[str, int]:
        return Point(self.analysis_threads, self.search_threads, self.max_batch, self.server_threads).cfg()


@dataclass(frozen=True)
class MemoryPoint:
    server_threads: int
    max_batch: int
    peak_gib: float
    source: str = ""


@dataclass
class Measurements:
    bench: list[BenchPoint] = field(default_factory=list)
    loads: list[LoadPoint] = field(default_factory=list)
    memory: list[MemoryPoint] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # what was left out, and why

    def extend(self, other: Measurements) -> None:
        self.bench += other.bench
        self.loads += other.loads
        self.memory += other.memory
        self.skipped += other.skipped

    def __len__(self) -> int:
        return len(self.bench) + len(self.loads)


def _bench_points(
    series: Iterable[tuple[str, float, int]], server_threads: int, visits: int, source: str
) -> list[BenchPoint]:
    by_threads: dict[int, dict[str, float]] = defaultdict(dict)
    for name, value, step in series:
        by_threads[int(step)][name] = float(value)
    max_batch = benchmark_max_batch(list(by_threads))
    points = []
    for threads, row in sorted(by_threads.items()):
        evals, batch = row.get("bench_nn_evals_per_s"), row.get("bench_avg_batch_size")
        if evals is None or batch is None:
            continue
        visits_per_s = row.get("bench_visits_per_s", evals)
        points.append(BenchPoint(threads, server_threads, max_batch, visits, evals, visits_per_s, batch, source))
    return points


def _memory(gpu: Mapping[str, Any] | None, server_threads: int, max_batch: int, source: str) -> list[MemoryPoint]:
    peak = (gpu or {}).get("gpu_mem_peak_mb")
    return [MemoryPoint(server_threads, max_batch, float(peak) / 1024.0, source)] if peak else []


def read_data(path: Path, net: str | None = None) -> Measurements:
    """A measurement file: a qualification's results.json (a JSON object with ``steps``) or a device run's JSON
    lines."""
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError:
        data = None  # JSON lines: one object per line
    if isinstance(data, dict) and "steps" in data:
        return read_qualification(data, path.name)
    if isinstance(data, dict) and data and all(isinstance(jobs, list) for jobs in data.values()):
        return read_job_export(data, net, path.name)
    return read_jsonl(path, net)


def read_job_export(data: Mapping[str, Any], net: str | None = None, name: str = "mlflow-jobs.json") -> Measurements:
    """{qualification: [job...]} with each job's MLflow params and metrics: the device-memory peak of every job that
    ran (``net``: keep the qualifications whose name starts with it, e.g. `katrain`)."""
    out = Measurements()
    for qualification, jobs in data.items():
        if net is not None and not qualification.startswith(net):
            continue
        for n, job in enumerate(jobs):
            params, metrics = job.get("params", {}), job.get("metrics", {})
            servers = _int_param(params, "katago.numNNServerThreadsPerModel", 1)
            batch = _int_param(params, "katago.nnMaxBatchSize", 256)
            out.memory += _memory(metrics, servers, batch, f"{name}:{qualification}[{n}]")
    return out


def _cfg_point(
    cfg: Mapping[str, Any], visits: int, concurrency: int, req_per_s: float, source: str, **extra: Any
) -> LoadPoint:
    return LoadPoint(
        analysis_threads=int(cfg.get("numAnalysisThreads", 1)),
        search_threads=int(cfg.get("numSearchThreadsPerAnalysisThread", 1)),
        max_batch=int(cfg.get("nnMaxBatchSize", 256)),
        server_threads=int(cfg.get("numNNServerThreadsPerModel", 1)),
        visits=visits,
        concurrency=concurrency,
        req_per_s=req_per_s,
        source=source,
        **extra,
    )


def read_qualification(data: Mapping[str, Any], name: str = "results.json") -> Measurements:
    """A qualification's results (``python -m kgbench.qualify``): its ``katago benchmark`` series, the jobs of its
    sweeps (the line and the wider sweep, through kgserve) and its 100-visit load through kgserve and through the
    engine's own pipe. Its policy load (maxVisits 1) is left out: part of it is answered from the NN cache across
    queries, which a steady state does not model."""
    scale = data["options"]["scale"]
    load = scale["load"]
    out = Measurements()
    for step in data["steps"]:
        where, body = f"{name}:{step['name']}", step.get("data") or {}
        if step.get("status") != "ok":
            out.skipped.append(f"{where}: step {step.get('status')}")
        elif step["name"] == "benchmark":
            servers = int(scale["threads"]["numNNServerThreadsPerModel"])
            series = [
                (f"bench_{key}", value, int(threads))
                for threads, row in body["series"].items()
                for key, value in row.items()
            ]
            out.bench += _bench_points(series, servers, int(scale["bench_visits"]), where)
        elif step["name"] in ("line", "wide"):
            if len(load["concurrency"]) != 1:
                out.skipped.append(f"{where}: a ladder of several levels (which one is the job's req/s?)")
                continue
            for job in body.get("jobs", []):
                if job.get("status") != "FINISHED" or not job.get("req_per_s"):
                    out.skipped.append(f"{where} {job.get('job')}: {job.get('status')} {job.get('reason', '')}")
                    continue
                out.loads.append(
                    _cfg_point(
                        job["cfg"],
                        int(load["max_visits"]),
                        int(load["concurrency"][0]),
                        float(job["req_per_s"]),
                        f"{where} {job['job']}",
                        batch=float(job.get("nn_avg_batch") or 0.0),
                        path="kgserve",
                    )
                )
        elif step["name"] == "promote" and body.get("metrics", {}).get("gpu_mem_peak_mb"):
            cfg = body["cfg"]
            servers, batch = int(cfg["numNNServerThreadsPerModel"]), int(cfg["nnMaxBatchSize"])
            out.memory += _memory(body["metrics"], servers, batch, where)
        elif step["name"] == "pipe":
            for kind, result in body.get("results", {}).items():
                if kind.endswith("_policy"):
                    out.skipped.append(f"{where} {kind}: maxVisits 1, partly answered from the NN cache")
                    continue
                path = "kgserve" if kind.startswith("kgserve") else "engine pipe"
                cores = float(result.get("engine_cpu_cores") or 0.0)
                out.loads.append(
                    _cfg_point(
                        body["cfg"],
                        int(body["visits"]),
                        int(result["concurrency"]),
                        float(result["req_per_s"]),
                        f"{where} {kind}",
                        cores=cores,
                        path=path,
                    )
                )
    return out


def read_jsonl(path: Path, net: str | None = None) -> Measurements:
    """A device run's JSON lines; ``net``: keep only the records of that net (their ``net`` field)."""
    out = Measurements()
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        rec = json.loads(line)
        where = f"{path.name}:{n}"
        if net is not None and rec.get("net") != net:
            continue
        if "error" in rec:
            out.skipped.append(f"{where}: {rec.get('kind')} failed ({str(rec['error'])[:80]})")
            continue
        if rec.get("kind") == "benchmark":
            servers = int(rec["server_threads"])
            points = _bench_points(rec.get("series", []), servers, int(rec["visits"]), where)
            out.bench += points
            if points:
                out.memory += _memory(rec.get("gpu"), servers, points[0].max_batch, where)
        elif rec.get("kind") == "engineload":
            result = rec["result"]
            point = LoadPoint(
                analysis_threads=int(rec["analysis"]),
                search_threads=int(rec["search"]),
                max_batch=int(rec["batch"]),
                server_threads=int(rec["servers"]),
                visits=int(rec["visits"]),
                # run 1 kept 2 x numAnalysisThreads in flight and did not record it; the model needs only
                # "at least numAnalysisThreads" (every analysis thread busy)
                concurrency=int(rec.get("concurrency", 2 * int(rec["analysis"]))),
                req_per_s=float(result["req_per_s"]),
                batch=float(result.get("nn_avg_batch") or 0.0),
                cores=float(result.get("cores") or 0.0),
                source=where,
            )
            out.loads.append(point)
            out.memory += _memory(rec.get("gpu_all"), point.server_threads, point.max_batch, where)
    return out


def _int_param(params: Mapping[str, str], key: str, default: int) -> int:
    value = params.get(key)
    return int(value) if value not in (None, "") else default


def read_sweep(tracking_uri: str | None, sweep: str | None, experiment: str | None = None) -> Measurements:
    """A kgbench sweep's jobs from MLflow: the sweep named by its id, the latest one when ``sweep`` is None, every
    sweep of the experiment when it is ``all`` (a qualification's results folder holds several in its mlflow.db)."""
    client = make_client(tracking_uri)
    if sweep == "all":
        exp = client.get_experiment_by_name(experiment or DEFAULT_EXPERIMENT)
        query = "tags.`kgbench.role` = 'sweep'"
        parents = client.search_runs([exp.experiment_id], query, max_results=1000) if exp is not None else []
    else:
        parents = [find_sweep(client, experiment, sweep)]
    out = Measurements()
    for run in (child for parent in parents for child in sweep_children(client, parent)):
        tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
        where = f"run {run.info.run_id[:8]}"
        reason = (
            "simulated"
            if tags.get("simulated") == "true"
            else "not ok"
            if tags.get("kgbench.status") != "ok"
            else "several engines"
            if _int_param(params, "engines", 1) != 1
            else ""
        )
        if reason:
            out.skipped.append(f"{where}: {reason}")
            continue
        servers = _int_param(params, "katago.numNNServerThreadsPerModel", 1)
        max_batch = _int_param(params, "katago.nnMaxBatchSize", 256)
        history = {
            name: [(m.key, m.value, m.step) for m in client.get_metric_history(run.info.run_id, name)]
            for name in ("bench_nn_evals_per_s", "bench_visits_per_s", "bench_avg_batch_size", "level_req_per_s")
        }
        if tags.get("mode") == "engine":
            series = history["bench_nn_evals_per_s"] + history["bench_visits_per_s"] + history["bench_avg_batch_size"]
            points = _bench_points(series, servers, _int_param(params, "bench.visits", 800), where)
            out.bench += points
            max_batch = points[0].max_batch if points else max_batch
        else:
            headline = int(metrics.get("headline_concurrency", 0))
            for _, req_per_s, level in history["level_req_per_s"]:
                out.loads.append(
                    LoadPoint(
                        analysis_threads=_int_param(params, "katago.numAnalysisThreads", 1),
                        search_threads=_int_param(params, "katago.numSearchThreadsPerAnalysisThread", 1),
                        max_batch=max_batch,
                        server_threads=servers,
                        visits=_int_param(params, "load.max_visits", 50),
                        concurrency=int(level),
                        req_per_s=float(req_per_s),
                        # the job's NN batch (whole run, all levels) is held against its headline level only
                        batch=float(metrics.get("nn_avg_batch_size", 0.0)) if level == headline else 0.0,
                        source=where,
                    )
                )
        out.memory += _memory(metrics, servers, max_batch, where)
    return out
