"""The two things a job can measure once its cfg is rendered: `mode=load` (a target, kgserve or the direct pipe,
under the load generator) and `mode=engine` (KataGo's own `katago benchmark`). Each logs its figures to the job's
run and returns the headline number; a failure raises JobFailure with a one-line reason.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from kgbench.enginebench.parse import trt_cache_status
from kgbench.enginebench.run import EngineBenchError, run_engine_benchmark
from kgbench.load.kinds import Traffic
from kgbench.load.types import LevelHook, LoadResult, LoadSettings
from kgbench.search.trial import TrialLink
from kgbench.sweep.compose.spec import Prepared, section
from kgbench.sweep.device import job_device, job_net, net_tags, watch_figures
from kgbench.sweep.failure import JobFailure
from kgbench.sweep.positions import job_traffic, position_metrics
from kgbench.sweep.progress import JobProgress
from kgbench.targets.base import Target
from kgbench.targets.direct import PoolTarget
from kgbench.targets.enginelog import find_unused_keys, parse_nn_stats, unused_key_reason
from kgbench.targets.faults import Fault, faults_text
from kgbench.targets.http import KgserveTarget
from kgbench.track.contention import Contention, ContentionSettings, wait_for_quiet
from kgbench.track.measure import MeasureWatch
from kgbench.track.schema import (
    CONTENDED,
    CONTENTION,
    CONTENTION_ATTEMPTS,
    FAULTS,
    KATAGO_VERSION,
    MODEL_FILE,
    MODEL_SHA256,
    PRUNED,
    RECOMMENDED_SOURCE,
    RECOMMENDED_THREADS,
    SIMULATED,
    TRT_CACHE,
    flag,
)
from kgbench.track.tracking import JobRun, log_load_result
from kgserve.engine.client import is_simulated

__all__ = ["engine_mode", "headline_value", "load_mode", "model_sha256"]

_VERSION_RE = re.compile(r"KataGo v(\S+)")


@lru_cache(maxsize=16)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def model_sha256(path: Path) -> str | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return _sha256(str(path), stat.st_size, stat.st_mtime_ns)


def _model_tags(prepared: Prepared) -> dict[str, str]:
    model = prepared.settings.engine.model_for(prepared.backend)
    tags = {MODEL_FILE: model.name, MODEL_SHA256: model_sha256(model) or "unknown"}
    return {**tags, **net_tags(model, job_net(model))}


def _ready_tags(ready: Mapping[str, Any]) -> dict[str, str]:
    tags: dict[str, str] = {}
    if ready.get("katago_version"):
        tags[KATAGO_VERSION] = str(ready["katago_version"])
    if "simulated" in ready:
        tags[SIMULATED] = flag(bool(ready.get("simulated")))
    return tags


def headline_value(result: LoadResult) -> float:
    """The job's headline: the best level's req/s, or its analysed turns/s when the traffic's requests are not one
    turn each (review, interactive, mixed: a review's game may outlast the windows); JobFailure (with the errors by
    kind) when nothing succeeded."""
    head = result.headline()
    value = head.rate(result.traffic != "distinct")[0] if head is not None else 0.0
    if head is None or not value > 0:
        kinds: dict[str, int] = {}
        for level in result.levels:
            for kind, count in level.errors_by_kind.items():
                kinds[kind] = kinds.get(kind, 0) + count
        raise JobFailure(f"no request succeeded at any level (errors by kind: {kinds or 'none recorded'})")
    return float(value)


def _load_settings(cfg: DictConfig) -> LoadSettings:
    section = OmegaConf.to_container(cfg.load, resolve=True) if cfg.get("load") is not None else {}
    try:
        return LoadSettings.from_mapping(section)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise JobFailure(f"bad load settings: {exc}") from None


def _target(prepared: Prepared, job_dir: Path) -> Target:
    log_path = job_dir / "kgserve_stderr.log"  # the engines' stderr either way (the file, not the terminal)
    if prepared.transport == "direct":
        return PoolTarget(prepared.settings, prepared.backend, log_path)
    return KgserveTarget(prepared.kgserve_config, log_path)


def _measure(
    target: Target,
    prepared: Prepared,
    job_dir: Path,
    load: LoadSettings,
    queries: Traffic,
    run: JobRun,
    progress: JobProgress,
    on_level: LevelHook | None = None,
    contention: ContentionSettings | None = None,
) -> tuple[LoadResult, dict[str, float], str | None, Contention, list[Fault]]:
    """The target under the load generator: (result, extra metrics, `Unused key` failure or None, the windows'
    contention verdict, what went wrong in the target while measured)."""
    timeout = prepared.settings.engine.backend_settings(prepared.backend).startup_timeout_s * prepared.engines + 60
    progress.stage(f"starting {target.name} ({prepared.engines} {prepared.backend} engine(s), {prepared.transport})")
    extra: dict[str, float] = {}
    try:
        start_s, ready = target.start(timeout, progress.stage)
        extra["engine_start_s"] = start_s
        run.log_metrics({"engine_start_s": start_s})
        run.set_tags(_ready_tags(ready))
        progress.stage(f"ready after {start_s:.1f} s; measuring through {target.where}")
        with MeasureWatch(frontend_pid=target.frontend_pid, device=job_device(prepared.backend)) as watch:
            result = target.measure(load, queries, progress.update, on_level)
    finally:
        progress.stage(f"stopping {target.name}")
        target.stop(prepared.settings.server.grace_period_s)
    log = target.engine_log()
    extra.update(parse_nn_stats(log))
    if extra.get("nn_rows") and result.visits_total > 0:  # what the NN cache saved: below 1, rows it answered
        extra["nn_rows_per_visit"] = extra["nn_rows"] / result.visits_total
    figures, tags = watch_figures(prepared, watch, result, extra, job_dir)
    extra.update(figures)
    run.set_tags(tags)
    unused = find_unused_keys(log)
    verdict = watch.contention(result, load.window_s, contention or ContentionSettings())
    return result, extra, unused_key_reason(unused) if unused else None, verdict, target.faults()


def _contention_settings(cfg: DictConfig) -> ContentionSettings:
    try:
        return ContentionSettings.from_mapping(section(cfg, "contention"))
    except (TypeError, ValueError) as exc:
        raise JobFailure(f"bad contention settings: {exc}") from None


def contention_tags(attempts: list[Contention]) -> dict[str, str]:
    """The job's contention tags: flagged or not (the last measurement decides), its figures, every attempt."""
    last = attempts[-1]
    if last.flagged:
        figures = last.reason
    elif not last.checked:
        figures = "not checked (contention.check=false)" + (f": {last.reason}" if last.reason else "")
    else:
        worst = max((w.other_cpu_cores or 0.0 for w in last.windows), default=0.0)
        figures = f"clean: {len(last.windows)} window(s), other processes at most {worst:.2f} cores"
    history = "; ".join(
        f"measurement {i + 1}: " + (f"contended ({a.reason})" if a.flagged else "clean") for i, a in enumerate(attempts)
    )
    return {CONTENDED: flag(last.flagged), CONTENTION: figures[:4000], CONTENTION_ATTEMPTS: history[:4000]}


def load_mode(
    cfg: DictConfig,
    prepared: Prepared,
    job_dir: Path,
    run: JobRun,
    progress: JobProgress,
    sweep_dir: Path | None = None,
    job: str = "",
) -> float:
    """``sweep_dir``: the multirun's folder, whose ledger shares the positions out between the jobs (None: a single
    run, its own positions); ``job``: how the ledger names this job."""
    load = _load_settings(cfg)
    queries, position_tags = job_traffic(load, sweep_dir, job)
    run.set_tags({**_model_tags(prepared), **position_tags})
    link = TrialLink.from_cfg(cfg)  # launched by the Optuna sweeper: report every level to the trial
    if link is not None:
        run.set_tags({"optuna.study": str(cfg.search.study), "optuna.trial": str(link.number)})
    hook = link.on_level if link is not None else None
    log_path = job_dir / "kgserve_stderr.log"
    settings = _contention_settings(cfg)
    try:
        attempts: list[Contention] = []
        while True:
            result, extra, unused, verdict, faults = _measure(
                _target(prepared, job_dir), prepared, job_dir, load, queries, run, progress, hook, settings
            )
            attempts.append(verdict)
            pruned = link is not None and link.pruned_at is not None
            done = unused is not None or pruned or bool(faults) or len(attempts) > settings.remeasure
            if not verdict.flagged or done:
                break
            progress.stage(f"contended: {verdict.reason}")
            progress.stage(f"re-measuring ({len(attempts)} of {settings.remeasure}) once the host is quiet")
            wait_for_quiet(settings, job_device(prepared.backend), progress.stage)
            hook = None  # the search's pruner saw the first measurement: a re-measure reports nothing twice
        extra.update(position_metrics(queries))
        extra.update(attempts[-1].metrics(), contention_remeasures=float(len(attempts) - 1))
        run.set_tags(contention_tags(attempts))
        if attempts[-1].flagged:
            progress.stage(f"kept but marked contended: {attempts[-1].reason}")
    finally:
        log_text = log_path.read_text(encoding="utf-8", errors="replace") if log_path.exists() else ""
        if cache := trt_cache_status(log_text):  # TensorRT timing cache hit or miss, from the engine's log
            run.set_tags({TRT_CACHE: cache})
    if faults:  # an engine restarted, kgserve died: the figures are kept, never promoted (kgbench.decide.selection)
        run.set_tags({FAULTS: faults_text(faults)[:5000]})
        progress.stage(f"faulted: {faults_text(faults)}")
    if fatal := [f for f in faults if f.fatal]:
        log_load_result(run, result, extra, job_dir, "")
        raise JobFailure(faults_text(fatal))
    if unused is not None:  # KataGo ignored a key: the figures are logged, but they do not measure this cfg
        log_load_result(run, result, extra, job_dir, "")
        headline_value(result)
        raise JobFailure(unused)
    if link is not None and link.pruned_at is not None:
        run.set_tags({PRUNED: flag(True)})
        progress.stage(f"pruned by the search after level {link.pruned_at + 1}")
    log_load_result(run, result, extra, job_dir, f"{prepared.backend} {prepared.transport}: {job_dir.name}")
    return headline_value(result)


def engine_mode(cfg: DictConfig, prepared: Prepared, job_dir: Path, run: JobRun, progress: JobProgress) -> float:
    """`katago benchmark` with the job's cfg (kgbench.enginebench.run); metrics per thread count, step = threads."""
    bench_cfg = section(cfg, "engine_bench")
    engine = prepared.settings.engine
    raw_threads = bench_cfg.get("threads", [1, 2, 4, 8])
    threads = [int(t) for t in (raw_threads if isinstance(raw_threads, list) else [raw_threads])]
    run.set_tags(_model_tags(prepared))
    progress.stage(f"katago benchmark, threads {threads}")
    try:
        bench = run_engine_benchmark(
            argv_prefix=engine.argv_prefix(prepared.backend),
            cfg_keys=prepared.rendered.keys,
            model=engine.model_for(prepared.backend),
            visits=int(bench_cfg.get("visits", 800)),
            threads=threads,
            positions=int(bench_cfg.get("positions", 10)),
            workdir=job_dir,
            home_data_dir=engine.home_data_dir,
            timeout_s=float(bench_cfg.get("timeout_s", 3600)),
            startup_timeout_s=engine.backend_settings(prepared.backend).startup_timeout_s,
            progress=progress.stage,
        )
    except EngineBenchError as exc:
        raw = job_dir / "benchmark_output.txt"
        raw.write_text(exc.raw_text, encoding="utf-8")
        run.log_artifact(raw)
        raise JobFailure(str(exc)) from None
    for name in ("benchmark.stdout.log", "benchmark.stderr.log"):
        run.log_artifact(job_dir / name)
    run.log_artifact(bench.cfg_path)
    run.log_metrics(bench.metrics())
    run.log_metric_points([(name, value, step) for name, value, step in bench.metric_series()])
    output = bench.stdout + "\n" + bench.stderr
    tags = {RECOMMENDED_THREADS: str(bench.result.recommended_threads or "")}
    tags[RECOMMENDED_SOURCE] = bench.result.recommended_source
    if bench.trt_cache is not None:
        tags[TRT_CACHE] = bench.trt_cache
    if match := _VERSION_RE.search(output):
        tags[KATAGO_VERSION] = match.group(1)
    if is_simulated(prepared.backend, tags.get(KATAGO_VERSION), output=output):
        tags[SIMULATED] = flag(True)
    run.set_tags(tags)
    if unused := find_unused_keys(output):
        raise JobFailure(unused_key_reason(unused))
    visits = bench.metrics().get("visits_per_s")
    if visits is None:
        raise JobFailure("katago benchmark reported no visits/s")
    progress.stage(f"recommended threads: {tags.get(RECOMMENDED_THREADS) or '-'}")
    return float(visits)
