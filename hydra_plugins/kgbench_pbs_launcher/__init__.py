"""Hydra instantiates launchers only from the `hydra_plugins` namespace, and imports every module there at
each start (even `python -m kgbench --help`). This names kgbench's PBS launcher there and imports the real
one (kgbench.sweep.pbs.launcher: dask, distributed, mlflow, ~3 s) only when a sweep uses it."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

__all__ = ["PBSLauncher"]


class PBSLauncher(Launcher):
    """conf/hydra/launcher/pbs.yaml's target: kgbench.sweep.pbs.launcher.PBSLauncher, loaded on first use."""

    def __init__(self, **params: Any) -> None:
        module = importlib.import_module("kgbench.sweep.pbs.launcher")
        self.impl: Launcher = module.PBSLauncher(**params)

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.impl.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        return self.impl.launch(job_overrides, initial_job_idx)
