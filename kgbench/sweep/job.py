"""One kgbench job: render the KataGo cfg, run it (load through kgserve or direct, or `katago benchmark`),
record everything in MLflow. `run_job` never raises: a job that cannot run becomes a FAILED MLflow run
with a one-line reason, and the sweep goes on.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from kgbench.search.trial import record_job_end
from kgbench.sweep import modes
from kgbench.sweep.callbacks import (
    BOOKKEEPING,
    ENV_EXPERIMENT,
    ENV_JOB_KEY,
    ENV_JOBS,
    ENV_PARENT,
    ENV_SWEEP,
    display_overrides,
)
from kgbench.sweep.compose.render import RenderError
from kgbench.sweep.compose.spec import Prepared, check_engine_files, prepare, runtime_config_path, section
from kgbench.sweep.failure import JobFailure
from kgbench.sweep.grouping import build_key
from kgbench.sweep.interrupt import interrupt_reason
from kgbench.sweep.progress import JobProgress, job_done
from kgbench.targets.base import TargetError
from kgbench.targets.serving import changes_json, serving_line, serving_params, serving_settings
from kgbench.track import store_errors, tracking
from kgbench.track.naming import job_name
from kgbench.track.record import JobRecord, file_sha256, log_job_record, resolve_binary
from kgbench.track.runtime_id import this_machine
from kgbench.track.sampling.gpu import gpu_name
from kgbench.track.schema import (
    BACKEND,
    BUILD_GROUP,
    COLD_START,
    ENGINE_BINARY,
    ENGINE_MODEL,
    GIT_COMMIT,
    GPU_NAME,
    HOST,
    HYDRA_OVERRIDES,
    INVALID,
    JOB_KEY,
    JOB_OVERRIDES,
    LOAD_GROUP,
    MODE,
    RACE_OF,
    RACE_ROUND,
    RUNTIME_CONFIG,
    SERVING,
    SERVING_CHANGES,
    SIMULATED,
    UNSTABLE,
    WARNINGS,
    flag,
)
from kgserve.engine.client import is_simulated
from kgserve.settings import ConfigError

__all__ = ["JobContext", "JobOutcome", "context_from_hydra", "job_experiment", "run_job"]


@dataclass
class JobContext:
    job_dir: Path
    overrides: list[str] = field(default_factory=list)
    job_index: int | None = None
    job_total: int | None = None
    parent_run_id: str | None = None
    sweep_id: str | None = None
    job_key: str | None = None  # set by a remote launcher (kgbench.sweep.pbs.lost_jobs)
    sweep_dir: Path | None = None  # a multirun's folder: its ledger shares the positions out between the jobs
    load_group: str = ""  # the load group's option (smoke, cpu, ...): a smoke job's verdict says it is one

    @property
    def label(self) -> str:
        return display_overrides(self.overrides) or "defaults"


@dataclass
class JobOutcome:
    ok: bool
    value: float  # req/s (mode=load) or visits/s (mode=engine); NaN when the job failed
    reason: str | None = None
    run_id: str | None = None


def context_from_hydra() -> JobContext:
    hc = HydraConfig.get()
    total = os.environ.get(ENV_JOBS)
    multirun = hc.mode is not None and str(hc.mode.name) == "MULTIRUN"
    return JobContext(
        job_dir=Path(hc.runtime.output_dir),
        overrides=list(hc.overrides.task),
        job_index=int(hc.job.num) if multirun else 0,
        job_total=int(total) if total and total.isdigit() else (None if multirun else 1),
        parent_run_id=os.environ.get(ENV_PARENT) if multirun else None,
        sweep_id=os.environ.get(ENV_SWEEP) if multirun else None,
        job_key=os.environ.get(ENV_JOB_KEY) if multirun else None,
        # absolute, as the launchers resolve it (the PBS launcher on the submitting host): every job's ledger is
        # the one file next to the job folders
        sweep_dir=Path(str(hc.sweep.dir)).resolve() if multirun else None,
        load_group=str(hc.runtime.choices.get("load") or ""),
    )


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _params(cfg: DictConfig, prepared: Prepared) -> dict[str, Any]:
    params: dict[str, Any] = {f"katago.{k}": v for k, v in prepared.rendered.keys.items()}
    params.update(backend=prepared.backend, transport=prepared.transport, engines=prepared.engines, mode=prepared.mode)
    prefix, name = ("load", "load") if prepared.mode == "load" else ("bench", "engine_bench")
    for key, value in section(cfg, name).items():
        params[f"{prefix}.{key}"] = ",".join(str(v) for v in value) if isinstance(value, list) else value
    return params


def _base_tags(cfg: DictConfig, ctx: JobContext) -> dict[str, str]:
    backend = str(cfg.get("backend", ""))
    # where a job ran on a cluster: its PBS job (logs, accounting) and the launcher's key for it
    placement = {"pbs_job_id": os.environ.get("PBS_JOBID"), JOB_KEY: ctx.job_key}
    race = section(cfg, "race")
    replicate = {RACE_OF: str(race["of"]), RACE_ROUND: str(race.get("round", ""))} if race.get("of") else {}
    return {
        **{k: v for k, v in placement.items() if v},
        **replicate,
        # what a race re-runs: the overrides as launched, bookkeeping (search trial, race round) left out
        JOB_OVERRIDES: json.dumps([o for o in ctx.overrides if not o.startswith(BOOKKEEPING)]),
        BACKEND: backend,
        SIMULATED: flag(is_simulated(backend)),
        "transport": str(cfg.get("transport", "http")),
        MODE: str(cfg.get("mode", "load")),
        **({LOAD_GROUP: ctx.load_group} if ctx.load_group else {}),
        HYDRA_OVERRIDES: ctx.label,
        RUNTIME_CONFIG: str(runtime_config_path(cfg)),
        HOST: tracking.host_name(),
        GIT_COMMIT: tracking.git_commit(),
        GPU_NAME: gpu_name() or "none",
        UNSTABLE: flag(False),
        INVALID: flag(False),
        # every job starts its own kgserve: no engine or NN cache carries over from another job (and in a sweep
        # no position either: kgbench.sweep.positions)
        COLD_START: flag(True),
        **({BUILD_GROUP: key} if (key := build_key(section_of_top(cfg))) else {}),
    }


def section_of_top(cfg: DictConfig) -> dict[str, Any]:
    """The top-level scalars of the composed config (backend and the KataGo keys)."""
    return {str(k): v for k, v in cfg.items() if not isinstance(v, DictConfig)}


def _execute(cfg: DictConfig, ctx: JobContext, run: tracking.JobRun, progress: JobProgress) -> float:
    progress.stage("rendering the KataGo cfg")
    prepared = prepare(cfg, ctx.job_dir, ctx.label)
    run.log_params(_params(cfg, prepared))
    run.log_artifact(prepared.cfg_path)
    run.log_artifact(prepared.kgserve_config)
    if prepared.mode == "load":  # the serving settings its kgserve (or engine pool) runs with
        run.log_params(serving_params(serving_settings(prepared.settings)))
        line = serving_line(prepared.serving_changes, str(runtime_config_path(cfg)), prepared.transport)
        run.set_tags({SERVING: line, SERVING_CHANGES: changes_json(prepared.serving_changes)})
        progress.stage(f"serving: {line}")
    for warning in prepared.rendered.warnings:
        progress.stage(f"warning: {warning}")
    if prepared.rendered.warnings:
        run.set_tags({WARNINGS: " | ".join(prepared.rendered.warnings)})
    choice = section(cfg, "engine")
    if choice.get("binary"):  # engine.binary=: not the runtime config's KataGo (promote keeps such runs apart)
        run.set_tags({ENGINE_BINARY: prepared.settings.engine.argv_prefix(prepared.backend)[0]})
    if choice.get("model"):  # engine.model=katrain or synthetic:ARCH: say which file that is
        model = prepared.settings.engine.model_for(prepared.backend)
        run.set_tags({ENGINE_MODEL: str(model)})
        progress.stage(f"model: {model}")
    _log_record(run, prepared, choice)
    check_engine_files(prepared)
    if prepared.mode == "engine":
        return modes.engine_mode(cfg, prepared, ctx.job_dir, run, progress)
    return modes.load_mode(cfg, prepared, ctx.job_dir, run, progress, ctx.sweep_dir, f"{ctx.job_index}: {ctx.label}")


def _log_record(run: tracking.JobRun, prepared: Prepared, choice: dict[str, Any]) -> None:
    """The job's integrity record (kgbench.track.record): the cfg, KataGo and serving changes it measured, pinned by
    params. The tags above are for people and filters; promote reads only this."""
    binary = binary_sha256 = ""
    if choice.get("binary"):
        found = resolve_binary(prepared.settings.engine.argv_prefix(prepared.backend)[0])
        if found is not None:
            binary, binary_sha256 = str(found), file_sha256(found)
    model = str(prepared.settings.engine.model_for(prepared.backend)) if choice.get("model") else ""
    changes = json.loads(changes_json(prepared.serving_changes)) if prepared.mode == "load" else []
    record = JobRecord(file_sha256(prepared.cfg_path), binary, binary_sha256, model, changes)
    log_job_record(run.client, run.run_id, record, prepared.cfg_path.parent)


def job_experiment(cfg: DictConfig) -> str:
    """The sweep's experiment (its parent run's, ENV_EXPERIMENT), else the one this job's config names."""
    return os.environ.get(ENV_EXPERIMENT) or tracking.experiment_for(
        section(cfg, "mlflow").get("experiment"), is_simulated(str(cfg.get("backend", "")))
    )


def run_job(cfg: DictConfig, ctx: JobContext) -> JobOutcome:
    """Run one job and record it. Never raises (except KeyboardInterrupt: Ctrl-C or SIGTERM, after marking the run
    KILLED with the signal)."""
    started = time.monotonic()
    outcome: JobOutcome | None = None
    try:
        outcome = _run_job(cfg, ctx)
        return outcome
    finally:
        # a search's trial: the job-second budget (hydra.sweeper.budget_s), the node, why it failed; its end tells
        # the sweeper that the job was not lost
        failure = "interrupted" if outcome is None else outcome.reason
        record_job_end(cfg, time.monotonic() - started, this_machine, failure)
        job_done()  # the sweep's bar and its ETA


def _end_failed(run: tracking.JobRun, reason: str) -> None:
    """A run whose end could not be recorded in full: FAILED with its reason, else at least FAILED (one small write a
    store short of space may still take), so that it never stays RUNNING when the store lets it be ended."""
    for end in (lambda: run.finish(False, reason), lambda: tracking.finish_run(run.client, run.run_id, False)):
        try:
            end()
            return
        except Exception:
            continue
    print(f"kgbench: run {run.run_id} stays RUNNING: the store refused to end it ({reason})", file=sys.stderr)


def _run_job(cfg: DictConfig, ctx: JobContext) -> JobOutcome:
    progress = JobProgress(ctx.job_index, ctx.job_total, ctx.label)
    ctx.job_dir.mkdir(parents=True, exist_ok=True)
    hydra_yaml = ctx.job_dir / "hydra_config.yaml"
    run: tracking.JobRun | None = None
    try:
        client = tracking.make_client()
        run = tracking.JobRun.start(
            client,
            job_experiment(cfg),
            run_name=job_name(section_of_top(cfg), ctx.overrides),
            sweep_id=ctx.sweep_id,
            parent_run_id=ctx.parent_run_id,
            tags=_base_tags(cfg, ctx),
        )
        # after the run exists: a job folder on a full disk is recorded as this job's failure, with its reason
        hydra_yaml.write_text(OmegaConf.to_yaml(cfg, resolve=True), encoding="utf-8")
        run.log_artifact(hydra_yaml)
    except Exception as exc:
        error = store_errors.store_error(exc, tracking.tracking_uri())
        failure = _one_line(
            f"cannot record the job: {error}"
            if error is not None
            else f"cannot record the job in MLflow at {tracking.tracking_uri()}: {type(exc).__name__}: {exc}"
        )
        progress.stage(f"FAILED: {failure}")
        if run is not None:
            _end_failed(run, failure)
        return JobOutcome(False, math.nan, failure, run.run_id if run is not None else None)
    value = math.nan
    reason = None
    try:
        with progress:
            value = _execute(cfg, ctx, run, progress)
    except (JobFailure, TargetError, RenderError, ConfigError) as exc:
        reason = _one_line(str(exc))
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (kgbench.sweep.interrupt): the target is stopped by now
        with contextlib.suppress(Exception, KeyboardInterrupt):  # a second signal: kgbench.__main__ ends the rest
            run.log_artifact(ctx.job_dir / "kgserve_stderr.log")
            run.kill(interrupt_reason())
        progress.stage(f"KILLED: {interrupt_reason()}")
        raise
    except Exception as exc:
        error = store_errors.store_error(exc, tracking.tracking_uri(), ctx.job_dir)  # a full disk or store: one line
        reason = _one_line(str(error) if error is not None else f"{type(exc).__name__}: {exc}")
        with contextlib.suppress(OSError):  # the job's folder may be the full disk
            (ctx.job_dir / "error.txt").write_text(traceback.format_exc(), encoding="utf-8")
    try:
        run.log_artifact(ctx.job_dir / "error.txt")
        run.log_artifact(ctx.job_dir / "kgserve_stderr.log")
        run.finish(reason is None, reason)
    except Exception as exc:
        error = store_errors.store_error(exc, tracking.tracking_uri())
        reason = reason or _one_line(f"cannot finish the MLflow run: {error or f'{type(exc).__name__}: {exc}'}")
        _end_failed(run, reason)
    if reason is not None:
        progress.stage(f"FAILED: {reason}")
        return JobOutcome(False, math.nan, reason, run.run_id)
    load = cfg.get("load") or {}
    unit = "visits/s" if cfg.get("mode", "load") != "load" else "req/s"
    unit = "turns/s" if unit == "req/s" and str(load.get("traffic", "distinct")) != "distinct" else unit
    progress.stage(f"done: {value:.4g} {unit}")
    return JobOutcome(True, value, None, run.run_id)
