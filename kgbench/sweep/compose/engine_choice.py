"""`engine.binary=` and `engine.model=` on kgbench's command line: this run's KataGo build and network instead of
the runtime config's. A model is a file, `katrain` (the net inside the katrain extra) or `synthetic:ARCH` (a net of
that architecture with random weights, written once into the user's cache folder: a throughput test)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kgbench.nets import architecture, write_synthetic
from kgserve.settings import ConfigError, Settings

__all__ = ["SYNTHETIC_SPEC", "apply_engine_choice", "synthetic_net_path"]

SYNTHETIC_SPEC = "synthetic:"


def synthetic_net_path(arch_name: str) -> Path:
    """The synthetic net of `arch_name`, written on first use into $XDG_CACHE_HOME/kgbench/nets (~/.cache)."""
    try:
        arch = architecture(arch_name)
    except ValueError as exc:
        raise ConfigError(f"engine.model=synthetic:{arch_name}: {exc}") from None
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kgbench" / "nets"
    path = cache / f"synthetic-{arch.name}.bin"
    if not path.is_file():
        write_synthetic(arch, path)
    return path


def apply_engine_choice(settings: Settings, choice: dict[str, Any]) -> Settings:
    """`settings` with `engine.binary` as the command of its backend and `engine.model` as its model; ConfigError
    (a failed job with its one-line reason) for a model that cannot be had."""
    binary, model = choice.get("binary"), choice.get("model")
    if binary:
        path = Path(str(binary)).expanduser().resolve()
        engine = settings.engine
        backend = engine.backend_settings().model_copy(update={"command": [str(path)]})
        backends = {**engine.backends, engine.backend: backend}
        settings = settings.model_copy(update={"engine": engine.model_copy(update={"backends": backends})})
    if model:
        text = str(model)
        chosen = str(synthetic_net_path(text.removeprefix(SYNTHETIC_SPEC))) if text.startswith(SYNTHETIC_SPEC) else text
        settings = settings.with_overrides(model=chosen)  # ConfigError (one line) when katrain is missing
    return settings
