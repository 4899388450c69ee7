"""kgbench's Hydra sweepers, registered where Hydra looks for plugins (only classes defined under the
``hydra_plugins`` package may be instantiated as plugins). The work is done in ``kgbench.sweep``."""

from kgbench.sweep.grid_sweeper import GroupedSweeper as _GroupedSweeper
from kgbench.sweep.optuna_sweeper import OptunaSweeper as _OptunaSweeper


class GroupedSweeper(_GroupedSweeper):
    """``_target_: hydra_plugins.kgbench_sweepers.GroupedSweeper`` (see kgbench.sweep.grid_sweeper)."""


class OptunaSweeper(_OptunaSweeper):
    """``_target_: hydra_plugins.kgbench_sweepers.OptunaSweeper`` (see kgbench.sweep.optuna_sweeper)."""


__all__ = ["GroupedSweeper", "OptunaSweeper"]
