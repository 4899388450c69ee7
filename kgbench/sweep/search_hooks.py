"""What the sweep gives the Optuna search (kgbench.search.optuna_sweeper.SweepHooks): the environment part of its
measuring condition, and the sweep's opening or refusal.

The environment is what a config does not say and a figure depends on (kgbench.search.condition): the KataGo
binary and the network by content (sha256: the same file at another path, on another node, is the same engine; a
rebuilt binary or another net is not), the simulated engine's own settings (``KGSERVE_SIM_*`` but the device's
name, which only names a contention group), and the machine: this host's GPU (by name), else the host, or under a
remote launcher (PBS) the nodes it asks for, since the search runs elsewhere than its jobs (each job then writes its
node's machine into its trial, and the search warns when they differ).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from functools import lru_cache
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from kgbench.sweep import state
from kgbench.sweep.callbacks import open_sweep
from kgbench.sweep.compose.engine_choice import apply_engine_choice
from kgbench.sweep.compose.spec import runtime_config_path, section
from kgbench.sweep.pbs.cluster import resource_spec
from kgbench.track.runtime_id import this_machine
from kgserve.engine.client import is_simulated
from kgserve.settings import ConfigError, load_settings
from kgserve.sim.startup import VERSION as SIM_VERSION

__all__ = ["SearchHooks", "file_identity", "measuring_environment"]

REMOTE_LAUNCHERS = ("PBSLauncher",)  # their jobs run on other nodes
SIM_NOT_MEASURED = ("KGSERVE_SIM_DEVICE",)


@lru_cache(maxsize=16)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()[:16]


def file_identity(path: str | Path) -> str:
    """``sha256:<16 hex>`` of a file's content (a command on PATH is looked up), or why it has none here."""
    text = str(path)
    found = text if Path(text).is_file() else shutil.which(text)
    if not found:
        return f"missing: {text}"
    stat = os.stat(found)
    try:
        return f"sha256:{_digest(str(Path(found).resolve()), stat.st_size, stat.st_mtime_ns)}"
    except OSError as exc:
        return f"unreadable: {text}: {exc.strerror or exc}"


def _machine(config: DictConfig) -> str:
    launcher = str(OmegaConf.select(config, "hydra.launcher._target_", default="") or "")
    if not any(name in launcher for name in REMOTE_LAUNCHERS):
        return this_machine()
    try:
        cluster = load_settings(runtime_config_path(config)).cluster
    except ConfigError:
        cluster = None
    if cluster is None:
        return "PBS nodes"
    return f"PBS nodes ({resource_spec(cluster)}, queue {cluster.queue or 'default'})"


def measuring_environment(config: DictConfig) -> tuple[dict[str, str], dict[str, str]]:
    """(environment, shown): the condition's environment part, and the paths behind it for the reader."""
    backend = str(config.get("backend", ""))
    environment: dict[str, str] = {"machine": _machine(config)}
    shown: dict[str, str] = {}
    try:
        settings = load_settings(runtime_config_path(config)).with_overrides(backend=backend)
        settings = apply_engine_choice(settings, section(config, "engine"))
    except ConfigError as exc:  # every job fails the same way; the condition says so
        environment["engine"] = f"not known: {' '.join(str(exc).split())}"
        return environment, shown
    model = settings.engine.model_for(backend)
    environment["network"] = file_identity(model)
    shown["network"] = str(model)
    if is_simulated(backend):
        environment["engine"] = f"kgserve.sim {SIM_VERSION}"
        environment.update(
            {k: v for k, v in sorted(os.environ.items()) if k.startswith("KGSERVE_SIM_") and k not in SIM_NOT_MEASURED}
        )
    else:
        binary = settings.engine.argv_prefix(backend)[0]
        environment["engine"] = file_identity(binary)
        shown["engine"] = binary
    return environment, shown


def _note(message: str) -> None:
    print(f"kgbench: {message}", file=sys.stderr, flush=True)


class SearchHooks:
    """kgbench.search.optuna_sweeper.SweepHooks for kgbench's sweeps."""

    def environment(self, config: DictConfig) -> tuple[dict[str, str], dict[str, str]]:
        return measuring_environment(config)

    def opened(self, config: DictConfig, jobs: int) -> None:
        open_sweep(config, jobs, simulated=is_simulated(str(config.get("backend", ""))))

    def refused(self, message: str) -> None:
        _note(message)
        state.refuse(message)
