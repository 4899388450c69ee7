"""One kgbench job: render the KataGo cfg, run it (load through kgserve or direct, or `katago benchmark`),
record everything in MLflow. `run_job` never raises: a job that cannot run becomes a FAILED MLflow run
with a one-line reason, and the sweep goes on.
"""

from __future__ import annotations

import math
import os
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from kgbench.sweep.callbacks import ENV_JOBS, ENV_PARENT, ENV_SWEEP, display_overrides
from kgbench.sweep.progress import JobProgress
from kgbench.sweep.render import Rendered, RenderError, render_cfg
from kgbench.targets.kgserve_process import JobFailure
from kgbench.track import tracking
from kgserve.settings import DEFAULT_CONFIG_PATH, ConfigError, Settings, load_settings

__all__ = ["JobContext", "JobOutcome", "context_from_hydra", "job_settings_yaml", "prepare", "run_job"]


@dataclass
class JobContext:
    job_dir: Path
    overrides: list[str] = field(default_factory=list)
    job_index: int | None = None
    job_total: int | None = None
    parent_run_id: str | None = None
    sweep_id: str | None = None

    @property
    def label(self) -> str:
        return display_overrides(self.overrides) or "defaults"


@dataclass
class JobOutcome:
    ok: bool
    value: float  # req/s (mode=load) or visits/s (mode=engine); NaN when the job failed
    reason: str | None = None
    run_id: str | None = None


@dataclass
class Prepared:
    """What a job runs with, before anything starts."""

    settings: Settings  # runtime config with this job's backend, cfg and engine count
    runtime: Settings  # the runtime config as given (with this job's backend and cfg): for error messages
    rendered: Rendered
    cfg_path: Path
    kgserve_config: Path
    backend: str
    mode: str
    transport: str
    engines: int


def context_from_hydra() -> JobContext:
    from hydra.core.hydra_config import HydraConfig

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
    )


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def job_settings_yaml(settings: Settings, cfg_path: Path, engines: int, min_inflight: int) -> str:
    """A kgserve config for this job only: absolute paths, loopback, no auth, this job's cfg and engines."""
    data: dict[str, Any] = settings.model_dump(mode="json")
    data["engine"]["cfg"] = str(cfg_path)
    data["engine"]["processes"] = engines
    if data["engine"].get("min_ready") and data["engine"]["min_ready"] > engines:
        data["engine"]["min_ready"] = None
    data["server"].update(host="127.0.0.1", port=0, auth_token_env=None)
    limits = data.setdefault("limits", {})
    limits["max_inflight_queries"] = max(int(limits.get("max_inflight_queries", 0)), min_inflight)
    header = "# kgserve config of one kgbench job (generated from the runtime config; absolute paths)\n"
    return header + yaml.safe_dump(data, sort_keys=False)


def prepare(cfg: DictConfig, job_dir: Path, label: str = "") -> Prepared:
    """Render and validate the cfg, write katago.cfg and the job's kgserve config. Raises RenderError,
    ConfigError or JobFailure (all one line) before any engine starts."""
    mode, transport = str(cfg.get("mode", "load")), str(cfg.get("transport", "http"))
    if mode not in ("load", "engine"):
        raise JobFailure(f"mode={mode!r} is not a kgbench mode: use mode=load or mode=engine")
    if transport not in ("http", "direct"):
        raise JobFailure(f"transport={transport!r} is not a kgbench transport: use transport=http or transport=direct")
    try:
        engines = int(cfg.get("engines", 1))
    except (TypeError, ValueError):
        raise JobFailure(f"engines={cfg.get('engines')!r} must be a positive integer") from None
    if engines < 1:
        raise JobFailure(f"engines={engines} must be a positive integer")
    backend = str(cfg.backend)
    runtime = Path(str(cfg.runtime_config)) if cfg.get("runtime_config") else DEFAULT_CONFIG_PATH
    settings = load_settings(runtime).with_overrides(backend=backend)
    rendered = render_cfg(
        cfg,
        home_data_dir=settings.engine.home_data_dir,
        header=[f"rendered by kgbench: backend={backend}", f"overrides: {label or '(defaults)'}"],
    )
    job_dir.mkdir(parents=True, exist_ok=True)
    cfg_path = (job_dir / "katago.cfg").resolve()
    cfg_path.write_text(rendered.text, encoding="utf-8")
    concurrency = section(cfg, "load").get("concurrency", [1]) if mode == "load" else [1]
    try:
        max_conc = max(int(c) for c in (concurrency if isinstance(concurrency, list) else [concurrency]))
    except (TypeError, ValueError):
        raise JobFailure(f"load.concurrency={concurrency!r} must be a list of positive integers") from None
    kgserve_config = (job_dir / "kgserve_config.yaml").resolve()
    kgserve_config.write_text(job_settings_yaml(settings, cfg_path, engines, 2 * max_conc + 16), encoding="utf-8")
    runtime_settings = settings.model_copy(update={"engine": settings.engine.model_copy(update={"cfg": cfg_path})})
    settings = load_settings(kgserve_config)
    return Prepared(settings, runtime_settings, rendered, cfg_path, kgserve_config, backend, mode, transport, engines)


def check_engine_files(prepared: Prepared) -> None:
    """The engine binary and model must exist here; otherwise one line naming the path, suggesting backend=sim."""
    from kgserve.cli import startup_problems

    problems = startup_problems(prepared.runtime)
    if problems:
        hint = "" if prepared.backend == "sim" else "; for a dry run without KataGo use backend=sim"
        raise JobFailure(f"cannot run backend={prepared.backend} here: {'; '.join(problems)}{hint}")


def section(cfg: DictConfig, name: str) -> dict[str, Any]:
    node = cfg.get(name)
    container = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else {}
    return {str(k): v for k, v in container.items()} if isinstance(container, dict) else {}


def _params(cfg: DictConfig, prepared: Prepared) -> dict[str, Any]:
    params: dict[str, Any] = {f"katago.{k}": v for k, v in prepared.rendered.keys.items()}
    params.update(backend=prepared.backend, transport=prepared.transport, engines=prepared.engines, mode=prepared.mode)
    prefix, name = ("load", "load") if prepared.mode == "load" else ("bench", "engine_bench")
    for key, value in section(cfg, name).items():
        params[f"{prefix}.{key}"] = ",".join(str(v) for v in value) if isinstance(value, list) else value
    return params


def _base_tags(cfg: DictConfig, ctx: JobContext) -> dict[str, str]:
    from kgbench.track.gpu import gpu_name

    backend = str(cfg.get("backend", ""))
    return {
        "backend": backend,
        "simulated": "true" if backend == "sim" else "false",
        "transport": str(cfg.get("transport", "http")),
        "mode": str(cfg.get("mode", "load")),
        "hydra_overrides": ctx.label,
        "host": tracking.host_name(),
        "git_commit": tracking.git_commit(),
        "gpu_name": gpu_name() or "none",
        "kgbench.unstable": "false",
        "kgbench.invalid": "false",
    }


def _execute(cfg: DictConfig, ctx: JobContext, run: tracking.JobRun, progress: JobProgress) -> float:
    from kgbench.sweep import modes

    progress.stage("rendering the KataGo cfg")
    prepared = prepare(cfg, ctx.job_dir, ctx.label)
    run.log_params(_params(cfg, prepared))
    run.log_artifact(prepared.cfg_path)
    run.log_artifact(prepared.kgserve_config)
    for warning in prepared.rendered.warnings:
        progress.stage(f"warning: {warning}")
    if prepared.rendered.warnings:
        run.set_tags({"kgbench.warnings": " | ".join(prepared.rendered.warnings)})
    check_engine_files(prepared)
    if prepared.mode == "engine":
        return modes.engine_mode(cfg, prepared, ctx.job_dir, run, progress)
    return modes.load_mode(cfg, prepared, ctx.job_dir, run, progress)


def run_job(cfg: DictConfig, ctx: JobContext) -> JobOutcome:
    """Run one job and record it. Never raises (except KeyboardInterrupt, after marking the run FAILED)."""
    progress = JobProgress(ctx.job_index, ctx.job_total, ctx.label)
    ctx.job_dir.mkdir(parents=True, exist_ok=True)
    hydra_yaml = ctx.job_dir / "hydra_config.yaml"
    try:
        hydra_yaml.write_text(OmegaConf.to_yaml(cfg, resolve=True), encoding="utf-8")
        client = tracking.make_client()
        run = tracking.JobRun.start(
            client,
            str(cfg.get("mlflow", {}).get("experiment", "kgbench")),
            run_name=ctx.label,
            sweep_id=ctx.sweep_id,
            parent_run_id=ctx.parent_run_id,
            tags=_base_tags(cfg, ctx),
        )
        run.log_artifact(hydra_yaml)
    except Exception as exc:
        failure = _one_line(
            f"cannot record the job in MLflow at {tracking.tracking_uri()}: {type(exc).__name__}: {exc}"
        )
        progress.stage(f"FAILED: {failure}")
        return JobOutcome(False, math.nan, failure)
    value = math.nan
    reason = None
    try:
        with progress:
            value = _execute(cfg, ctx, run, progress)
    except (JobFailure, RenderError, ConfigError) as exc:
        reason = _one_line(str(exc))
    except KeyboardInterrupt:
        run.finish(False, "interrupted (Ctrl-C)")
        raise
    except Exception as exc:
        reason = _one_line(f"{type(exc).__name__}: {exc}")
        (ctx.job_dir / "error.txt").write_text(traceback.format_exc(), encoding="utf-8")
    try:
        run.log_artifact(ctx.job_dir / "error.txt")
        run.log_artifact(ctx.job_dir / "kgserve_stderr.log")
        run.finish(reason is None, reason)
    except Exception as exc:
        reason = reason or _one_line(f"cannot finish the MLflow run: {type(exc).__name__}: {exc}")
    if reason is not None:
        progress.stage(f"FAILED: {reason}")
        return JobOutcome(False, math.nan, reason, run.run_id)
    progress.stage(f"done: {value:.4g} {'req/s' if cfg.get('mode', 'load') == 'load' else 'visits/s'}")
    return JobOutcome(True, value, None, run.run_id)
