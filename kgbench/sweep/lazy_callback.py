"""conf/config.yaml's Hydra callback, loaded lazily: Hydra instantiates it for every run, a single run too, but only
a multirun has work for it (kgbench.sweep.callbacks: the MLflow parent run, the sweep's summary). The real callback
and its modules (MLflow, matplotlib, ~1.5 s) are imported when a multirun starts, so that a single run that the
preflight refuses, or Hydra's own answers, never load them (kgbench.__main__, docs/performance.md)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

if TYPE_CHECKING:  # the import edge lint-imports checks (type-only imports count); at run time: _real()
    from kgbench.sweep.callbacks import KgbenchCallback as _Real

__all__ = ["LazyKgbenchCallback"]


class LazyKgbenchCallback(Callback):
    """kgbench.sweep.callbacks.KgbenchCallback's multirun hooks, the real one made at the first of them."""

    def __init__(self) -> None:
        self._impl: _Real | None = None

    def _real(self) -> _Real:
        if self._impl is None:
            self._impl = importlib.import_module("kgbench.sweep.callbacks").KgbenchCallback()
        return self._impl

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._real().on_multirun_start(config, **kwargs)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self._real().on_multirun_end(config, **kwargs)
