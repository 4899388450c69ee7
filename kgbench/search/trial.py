"""A job's end of an Optuna trial: report an intermediate value after every level, stop when the pruner says so.

The sweeper adds ``++search.journal=PATH ++search.study=NAME ++search.trial=N`` to the job's overrides; the job
opens the journal itself, so this works in the sweeper's process (basic launcher) as well as in a job started on
another node. The intermediate value at step k is the best req/s over the levels measured so far (it only grows,
so the pruner compares like with like). A pruned job records ``kgbench.pruned_at_step`` on its trial; the sweeper
reads it and tells the trial as PRUNED. Every job, whatever came of it, records its end (``record_job_end``): its
wall seconds (``kgbench.job_s``) for the search's job-second budget (kgbench.search.budget), the machine it ran on
(``kgbench.machine``: under PBS, the node's) and, when it failed, its one-line reason (``kgbench.failure``). A
trial whose job returned without that end was lost (its process or node died), not failed: the sweeper measures
its config again (kgbench.search.lease).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path

import optuna
from omegaconf import DictConfig

from kgbench.load.types import LevelSummary
from kgbench.search.attrs import FAILURE_ATTR, JOB_S_ATTR, MACHINE_ATTR, PRUNED_ATTR
from kgbench.search.space import SearchError
from kgbench.search.study import open_study, trial_by_number

__all__ = ["PRUNED_ATTR", "TrialLink", "record_job_end", "trial_overrides"]

log = logging.getLogger(__name__)


def trial_overrides(journal: str, study: str, number: int) -> list[str]:
    """The overrides that tell a job which trial it runs (quoted: a path may hold characters Hydra parses)."""
    for name, value in (("journal", journal), ("study", study)):
        if "'" in value or "\\" in value:
            raise SearchError(f"the Optuna {name} {value!r} must not contain quotes or backslashes")
    return [f"++search.journal='{journal}'", f"++search.study='{study}'", f"++search.trial={number}"]


def record_job_end(cfg: DictConfig, seconds: float, machine: Callable[[], str], failure: str | None) -> None:
    """Write the job's end into its trial when a search launched it: its reason when it failed (``kgbench.failure``),
    the machine (``kgbench.machine``, asked of ``machine`` only for a search's job) and, last, its wall seconds
    (``kgbench.job_s``: the sweeper reads it as "the job ended"). Never raises: a trial that cannot be written is
    left to the sweeper, which then counts the batch's seconds."""
    search = cfg.get("search")
    if search is None or search.get("trial") is None:
        return
    try:
        trial = trial_by_number(open_study(str(search.journal), str(search.study)), int(search.trial))
        if failure:
            trial.set_user_attr(FAILURE_ATTR, failure)
        trial.set_user_attr(MACHINE_ATTR, machine())
        trial.set_user_attr(JOB_S_ATTR, round(float(seconds), 3))
    except Exception as exc:  # a finished or missing trial, an unreadable journal: the sweeper fills it in
        log.warning("could not record the job's end (%.1f s) in its trial: %s: %s", seconds, type(exc).__name__, exc)


class TrialLink:
    def __init__(self, trial: optuna.Trial) -> None:
        self.trial = trial
        self.best = -math.inf
        self.steps = 0
        self.pruned_at: int | None = None

    @classmethod
    def from_cfg(cls, cfg: DictConfig) -> TrialLink | None:
        """The job's trial when a search launched it (``search.trial`` set), else None."""
        search = cfg.get("search")
        if search is None or search.get("trial") is None:
            return None
        journal, name = search.get("journal"), search.get("study")
        if not journal or not name or not Path(str(journal)).exists():
            raise SearchError(f"search.trial is set but the journal {journal!r} / study {name!r} cannot be opened")
        return cls(trial_by_number(open_study(str(journal), str(name)), int(search.trial)))

    @property
    def number(self) -> int:
        return self.trial.number

    def on_level(self, level: LevelSummary) -> bool:
        """Report the level; True when the trial should stop here (pruned)."""
        if math.isfinite(level.req_per_s):
            self.best = max(self.best, level.req_per_s)
        if math.isfinite(self.best):
            self.trial.report(self.best, self.steps)
        step = self.steps
        self.steps += 1
        if math.isfinite(self.best) and self.trial.should_prune():
            self.pruned_at = step
            self.trial.set_user_attr(PRUNED_ATTR, step)
            return True
        return False
