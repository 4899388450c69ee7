"""What one job runs with, worked out before anything starts: the rendered KataGo cfg, the job's kgserve config
and its transport, mode and engine count (``prepare``). Every problem found here is one line (RenderError,
ConfigError or JobFailure), so a job fails before any engine starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from kgbench.sweep.compose.engine_choice import apply_engine_choice
from kgbench.sweep.compose.render import Rendered, render_cfg
from kgbench.sweep.failure import JobFailure
from kgbench.targets.serving import Change, for_load_generator
from kgserve.katago.netfile import is_synthetic_model
from kgserve.preflight import startup_problems
from kgserve.settings import DEFAULT_CONFIG_PATH, Settings, load_settings

__all__ = ["Prepared", "check_engine_files", "job_settings_yaml", "prepare", "runtime_config_path", "section"]


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
    serving_changes: tuple[Change, ...] = ()  # the job's kgserve's settings that are not the runtime's, and why


def job_settings_yaml(settings: Settings, cfg_path: Path, engines: int) -> tuple[str, list[Change]]:
    """A kgserve config for this job only: the runtime's serving settings with this job's cfg and engines (what
    promote writes), absolute paths, and what its load generator's connection needs (kgbench.targets.serving:
    loopback, a free port, no token; every limit the runtime's); those changes, each with why."""
    data: dict[str, Any] = settings.model_dump(mode="json")
    data["engine"]["cfg"] = str(cfg_path)
    data["engine"]["processes"] = engines
    if data["engine"].get("min_ready") and data["engine"]["min_ready"] > engines:
        data["engine"]["min_ready"] = None
    # a synthetic net is what a throughput test measures: the job's kgserve serves it (its run is tagged)
    if is_synthetic_model(settings.engine.model_for(settings.engine.backend)):
        data["engine"]["throughput_test"] = True
    changes = for_load_generator(data)
    header = "# kgserve config of one kgbench job (generated from the runtime config; absolute paths)\n"
    return header + yaml.safe_dump(data, sort_keys=False), changes


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
    settings = apply_engine_choice(
        load_settings(runtime_config_path(cfg)).with_overrides(backend=backend), section(cfg, "engine")
    )
    rendered = render_cfg(
        cfg,
        home_data_dir=settings.engine.home_data_dir,
        header=[f"rendered by kgbench: backend={backend}", f"overrides: {label or '(defaults)'}"],
    )
    job_dir.mkdir(parents=True, exist_ok=True)
    cfg_path = (job_dir / "katago.cfg").resolve()
    cfg_path.write_text(rendered.text, encoding="utf-8")
    kgserve_config = (job_dir / "kgserve_config.yaml").resolve()
    text, changes = job_settings_yaml(settings, cfg_path, engines)
    kgserve_config.write_text(text, encoding="utf-8")
    # kgbench measures a synthetic net's throughput: the start-up checks must not refuse it (its runs are tagged)
    synthetic = is_synthetic_model(settings.engine.model_for(backend)) or settings.engine.throughput_test
    engine = settings.engine.model_copy(update={"cfg": cfg_path, "throughput_test": synthetic})
    runtime_settings = settings.model_copy(update={"engine": engine})
    settings = load_settings(kgserve_config)
    return Prepared(settings, runtime_settings, rendered, cfg_path, kgserve_config, backend, mode, transport, engines,
                    tuple(changes))  # fmt: skip


def check_engine_files(prepared: Prepared) -> None:
    """The engine binary and model must exist here (the sweep's preflight checked them before any job; a file can go
    meanwhile, and a job on another node sees other files); otherwise one line naming the path and the fixes."""
    problems = startup_problems(prepared.runtime)
    if problems:
        hint = (
            ""
            if prepared.backend == "sim"
            else (
                "; runtime/fetch_katago.sh fetches the pinned builds and network, engine.binary=PATH engine.model=PATH "
                "name your own, and backend=sim runs the simulated engine"
            )
        )
        raise JobFailure(f"cannot run backend={prepared.backend} here: {'; '.join(problems)}{hint}")


def runtime_config_path(cfg: DictConfig) -> Path:
    """The runtime config a job is composed from: `runtime_config=`, else runtime/config.yaml."""
    return (Path(str(cfg.runtime_config)) if cfg.get("runtime_config") else DEFAULT_CONFIG_PATH).resolve()


def section(cfg: DictConfig, name: str) -> dict[str, Any]:
    node = cfg.get(name)
    container = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else {}
    return {str(k): v for k, v in container.items()} if isinstance(container, dict) else {}
