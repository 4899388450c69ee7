"""Composed Hydra config -> the KataGo analysis cfg of one job. Pure: no files, no processes.

Every top-level scalar (or list of scalars) of the composed config is a KataGo key, except kgbench's own
keys (`KGBENCH_KEYS`) and mappings (load, mlflow, engine_bench, ...). `null` leaves a key out of the cfg.
Each key is checked against the keys KataGo reads: an unknown key raises `RenderError` naming it and the
closest valid key, because KataGo itself would only warn (`Unused key`) and run with its default.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from kgserve.katago.cfg import KNOWN_ANALYSIS_KEYS, cfg_text, format_value, is_known_key
from kgserve.katago.cfgcheck import suggest_key, value_problem_for

__all__ = [
    "KGBENCH_KEYS",
    "RenderError",
    "Rendered",
    "katago_keys",
    "render_cfg",
    "suggest_key",
    "thread_warning",
    "validate_keys",
]

# top-level keys that configure kgbench itself, never rendered into the KataGo cfg
KGBENCH_KEYS = frozenset({"backend", "mode", "transport", "engines", "runtime_config"})


class RenderError(ValueError):
    """The composed config cannot become a KataGo cfg (one line, names the key)."""


@dataclass(frozen=True)
class Rendered:
    text: str  # the cfg file
    keys: dict[str, str]  # every rendered key -> its value as written (MLflow params katago.<key>)
    warnings: list[str] = field(default_factory=list)


def _plain(cfg: Mapping[str, Any] | DictConfig) -> dict[str, Any]:
    if isinstance(cfg, DictConfig):
        container = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(container, dict)
        return {str(k): v for k, v in container.items()}
    return dict(cfg)


def katago_keys(cfg: Mapping[str, Any] | DictConfig) -> dict[str, Any]:
    """The KataGo keys of a composed config, in config order (null values left out)."""
    out: dict[str, Any] = {}
    for key, value in _plain(cfg).items():
        if key in KGBENCH_KEYS or key == "hydra" or isinstance(value, Mapping) or value is None:
            continue
        if isinstance(value, list | tuple) and any(isinstance(v, Mapping | list | tuple) for v in value):
            raise RenderError(f"KataGo key {key!r} must be a scalar or a flat list, got {value!r}")
        out[key] = value
    return out


def validate_keys(keys: Iterable[str], known: frozenset[str] = KNOWN_ANALYSIS_KEYS) -> None:
    for key in keys:
        if key in known or is_known_key(key):
            continue
        hint = suggest_key(key, known)
        did_you_mean = f"; did you mean {hint!r}?" if hint else "; see KataGo's analysis_example.cfg"
        raise RenderError(
            f"unknown KataGo key {key!r}: KataGo's analysis engine does not read it (it would only warn "
            f"'Unused key' and run with its default){did_you_mean}"
        )


def _int(keys: Mapping[str, Any], key: str, default: int | None) -> int | None:
    value = keys.get(key, default)
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        raise RenderError(f"KataGo key {key!r} must be an integer, got {value!r}") from None


def thread_warning(keys: Mapping[str, Any], backend: str = "cuda") -> str | None:
    """The classic small-batch trap: fewer threads in flight than the batches could hold (on a GPU build, and the
    simulated GPU, the GPU then waits; the CPU build only batches less)."""
    analysis = _int(keys, "numAnalysisThreads", None)
    search = _int(keys, "numSearchThreadsPerAnalysisThread", 1)
    batch = _int(keys, "nnMaxBatchSize", None)
    servers = _int(keys, "numNNServerThreadsPerModel", 1)
    if analysis is None or batch is None or search is None or servers is None:
        return None
    in_flight, capacity = analysis * search, batch * servers
    if in_flight >= capacity:
        return None
    return (
        f"threads in flight numAnalysisThreads x numSearchThreadsPerAnalysisThread = {analysis} x {search} = "
        f"{in_flight} cannot fill nnMaxBatchSize x numNNServerThreadsPerModel = {batch} x {servers} = {capacity}: "
        "batches will stay small" + ("" if backend == "eigen" else " and the GPU underused")
    )


def render_cfg(
    cfg: Mapping[str, Any] | DictConfig,
    *,
    home_data_dir: str | Path | None = None,
    header: Iterable[str] = (),
    known: frozenset[str] = KNOWN_ANALYSIS_KEYS,
) -> Rendered:
    """Render and validate. `homeDataDir` is set to `home_data_dir` (the runtime config's persistent folder,
    so TensorRT timing caches survive) unless the config sets it. `header` lines become `# ` comments."""
    keys = katago_keys(cfg)
    validate_keys(keys, known)
    for key, value in keys.items():  # the value rules kgserve checks at start (kgserve.katago.cfgcheck)
        problem = value_problem_for(key, format_value(value))
        if problem:
            raise RenderError(f"KataGo key {key!r}: {problem}")
    if home_data_dir is not None and "homeDataDir" not in keys:
        keys["homeDataDir"] = str(home_data_dir)
    try:
        text = cfg_text(keys, header)
    except ValueError as exc:  # a value KataGo would not read back as written (a line break, a `#`, ...)
        raise RenderError(str(exc)) from None
    warning = thread_warning(keys, str(cfg.get("backend", "")))
    rendered = {key: format_value(value) for key, value in keys.items()}
    return Rendered(text=text, keys=rendered, warnings=[warning] if warning else [])
