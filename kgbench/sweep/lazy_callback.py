"""conf/config.yaml's Hydra callback, loaded lazily: Hydra instantiates it for every run, a single run too, but only
a multirun has work for it (kgbench.sweep.callbacks: the MLflow parent run, the sweep's summary). The real callback
and its modules (MLflow, matplotlib, ~1.5 s) are imported when a multirun has work for them, so that a single run that
the preflight refuses, a sweep that it refuses, or Hydra's own answers, never load them (kgbench.__main__,
docs/performance.md).

The real callback is needed at a multirun's start only for a sweeper that does not open the sweep itself (kgbench's
grid and Optuna sweepers open it after their preflight, kgbench.sweep.callbacks.open_sweep), and at its end only
once a sweep was opened: a sweep refused by the preflight never imported `open_sweep`'s module, so it has no parent
run, progress bar or environment to end.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from kgbench.sweep import state

if TYPE_CHECKING:  # the import edge lint-imports checks (type-only imports count); at run time: _real()
    from kgbench.sweep.callbacks import KgbenchCallback as _Real

__all__ = ["OPEN_THEMSELVES", "LazyKgbenchCallback", "open_sweep", "opens_itself"]

_REAL = "kgbench.sweep.callbacks"  # also open_sweep's module: a sweep opened at all has imported it

# kgbench's sweepers open the sweep themselves, once they know it can run: the grid after its preflight, the Optuna
# search after its journal and study are checked (kgbench.sweep.search_hooks)
OPEN_THEMSELVES = ("GroupedSweeper", "OptunaSweeper")


def open_sweep(
    config: DictConfig, jobs: int | None, *, simulated: bool, skipped: Sequence[tuple[str, str]] = ()
) -> str | None:
    """kgbench.sweep.callbacks.open_sweep, its module (MLflow, matplotlib, ~1.5 s) imported at this call: the grid
    sweeper calls it once its preflight passed, so a sweep the preflight refuses never loads them."""
    opened: str | None = importlib.import_module(_REAL).open_sweep(config, jobs, simulated=simulated, skipped=skipped)
    return opened


def opens_itself(config: DictConfig) -> bool:
    """Whether the multirun's sweeper opens the sweep itself (the callback then has nothing to do at its start)."""
    sweeper = str(config.hydra.sweeper.get("_target_", ""))
    return any(name in sweeper for name in OPEN_THEMSELVES)


class LazyKgbenchCallback(Callback):
    """kgbench.sweep.callbacks.KgbenchCallback's multirun hooks, the real one made at the first that has work."""

    def __init__(self) -> None:
        self._impl: _Real | None = None

    def _real(self) -> _Real:
        if self._impl is None:
            self._impl = importlib.import_module(_REAL).KgbenchCallback()
        return self._impl

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        state.reset()
        if not opens_itself(config):
            self._real().on_multirun_start(config, **kwargs)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self._impl is None and _REAL not in sys.modules:
            return  # no sweep was opened (refused by the preflight): nothing ran, nothing to summarise or clear
        self._real().on_multirun_end(config, **kwargs)
