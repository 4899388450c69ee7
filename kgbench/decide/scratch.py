"""The scratch runtime: where a promotion goes when it must not touch the tracked runtime/ files.

A simulated winner (the README's quick start) is promoted into `runtime/scratch/` (git-ignored) unless the user names
a config; `--runtime-dir DIR` puts any winner into DIR (the README's CPU build: runtime/eigen/, git-ignored). Either
is a `config.yaml` made from the runtime config the runs were composed from (same values, absolute paths, the
winner's backend, this folder's cfg, the serving settings the winner was measured with, and the KataGo and model the
runs named on the command line, if they did) next to the promoted `katago_serving.cfg`. The tracked
`runtime/config.yaml` and `runtime/katago_serving.cfg` change only when a sweep of their own runtime is promoted
(kgbench.decide.runtimes), so a checkout pulled onto the GPU node never serves a simulated or a CPU cfg by accident.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kgbench.targets.serving import apply_serving
from kgserve.paths import PROJECT_ROOT
from kgserve.settings import Settings

__all__ = ["DEFAULT_SCRATCH_DIR", "ScratchRuntime", "scratch_runtime", "serve_command"]

DEFAULT_SCRATCH_DIR = PROJECT_ROOT / "runtime" / "scratch"
CONFIG_NAME = "config.yaml"
CFG_NAME = "katago_serving.cfg"


@dataclass(frozen=True, slots=True)
class ScratchRuntime:
    directory: Path
    config_path: Path  # <directory>/config.yaml
    cfg_path: Path  # <directory>/katago_serving.cfg
    config_text: str  # what config.yaml must hold after the promotion


def _display(path: Path) -> str:
    """The path relative to the working directory when it is below it (shorter serve commands)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def serve_command(config_path: Path) -> str:
    return f"python -m kgserve --config {_display(config_path)}"


def scratch_runtime(
    settings: Settings,
    backend: str,
    directory: Path | None = None,
    throughput_test: bool = False,
    *,
    binary: str = "",
    model: str = "",
    serving: Mapping[str, Any] | None = None,
    tie: tuple[str, str] | None = None,
) -> ScratchRuntime:
    """The scratch runtime in `directory` (default runtime/scratch/) serving `backend` from its own cfg,
    with every other value taken from `settings` (the runtime config the promotion was given); `binary` and
    `model`: the KataGo and model file the winner ran instead of the config's; `throughput_test`: the winner ran a
    synthetic net, which kgserve serves only as a throughput test; `serving`: the serving settings the winner was
    measured with (kgbench.targets.serving, the load generator's changes undone), written over the config's; `tie`:
    the run id and sha256 of the cfg written beside it (kgserve.servedcfg checks them)."""
    folder = (directory or DEFAULT_SCRATCH_DIR).expanduser().resolve()
    cfg_path = folder / CFG_NAME
    data: dict[str, Any] = settings.model_dump(mode="json")  # paths are absolute once loaded
    data["engine"]["backend"] = backend
    data["engine"]["cfg"] = str(cfg_path)
    if binary:
        data["engine"]["backends"][backend]["command"] = [binary]
    if model:
        data["engine"]["backends"][backend]["model"] = model
    if serving:
        apply_serving(data, serving)
    if throughput_test:
        data["engine"]["throughput_test"] = True
    if tie is not None:
        data["engine"]["cfg_run_id"], data["engine"]["cfg_sha256"] = tie
    header = (
        f"# Scratch runtime written by `python -m kgbench.promote` from {settings.source}.\n"
        "# Paths are absolute; `python -m kgbench.promote` rewrites this file, edit the source config instead.\n"
        f"# Serve it with: python -m kgserve --config {folder / CONFIG_NAME}\n"
    )
    text = header + yaml.safe_dump(data, sort_keys=False)
    return ScratchRuntime(folder, folder / CONFIG_NAME, cfg_path, text)
