"""kgbench's Hydra sweepers, named where Hydra looks for plugins (only classes defined under the `hydra_plugins`
package may be instantiated as plugins). Hydra imports every module here at each start, so these stay thin and
import the real sweepers (kgbench.search.optuna_sweeper pulls in Optuna, ~1 s) only when a sweep uses them."""

from __future__ import annotations

import importlib
from typing import Any

from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from kgbench.sweep import state  # light (no MLflow): Hydra imports this module on every path

__all__ = ["GroupedSweeper", "OptunaSweeper"]


class _Lazy(Sweeper):
    """A sweeper whose implementation (``_impl``: module, class) is loaded when Hydra instantiates it."""

    _impl: tuple[str, str]

    def __init__(self, **params: Any) -> None:
        module, name = self._impl
        self.impl: Sweeper = getattr(importlib.import_module(module), name)(**params)

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.impl.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: list[str]) -> Any:
        returns = self.impl.sweep(arguments)
        if state.refused():  # nothing ran, nothing to race: the race's modules (MLflow) stay unloaded
            return returns
        # the runs tied with the leader, raced (kgbench.decide.race) with the sweep's own launcher, before the
        # multirun's end summarises it
        importlib.import_module("kgbench.sweep.racing").race_after_sweep(self.impl, returns)
        return returns


class OptunaSweeper(_Lazy):
    """conf/hydra/sweeper/kgbench_optuna.yaml's target: kgbench.search.optuna_sweeper.OptunaSweeper, given the
    sweep's hooks (kgbench.sweep.search_hooks: the condition's environment, the sweep's opening or refusal; the search
    sits below the sweep and cannot import it)."""

    _impl = ("kgbench.search.optuna_sweeper", "OptunaSweeper")

    def __init__(self, **params: Any) -> None:
        hooks = importlib.import_module("kgbench.sweep.search_hooks").SearchHooks()
        super().__init__(**params, hooks=hooks)


class GroupedSweeper(_Lazy):
    """conf/hydra/sweeper/kgbench_grid.yaml's target: kgbench.sweep.grid_sweeper.GroupedSweeper."""

    _impl = ("kgbench.sweep.grid_sweeper", "GroupedSweeper")
