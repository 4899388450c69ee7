"""The Optuna study a search works on: sampler and pruner, opening a study and a trial, telling a job's result;
shared by the sweeper and the jobs.

The study lives in Optuna's journal storage (kgbench.search.journal): one append-only file (``search.journal`` /
``hydra.sweeper.journal``), locked per write, so several sweeper processes on several nodes of a shared filesystem
can work on one study (each asks for trials and tells their results). The pruner's settings are kept in the study
(user attribute ``kgbench.pruner``) so that a job, in whatever process or node it runs, rebuilds the same pruner
when it opens its trial to report intermediate values. Which trials to ask, and what each counts:
kgbench.search.asking.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna
from optuna.pruners import BasePruner
from optuna.samplers import BaseSampler
from optuna.trial import TrialState

from kgbench.search.attrs import FAILED_ATTR, JOB_S_ATTR, PRUNED_ATTR, PRUNER_ATTR, REUSED_ATTR
from kgbench.search.journal import open_storage
from kgbench.search.space import SearchError, trial_key

__all__ = ["FAILED_ATTR", "JOB_S_ATTR", "PRUNED_ATTR", "PRUNER_ATTR", "REUSED_ATTR", "SearchError", "frozen_trial",
           "make_pruner", "make_sampler", "open_storage", "open_study", "startup_trials", "tell_job",
           "trial_by_number", "trial_key"]  # fmt: skip


STARTUP_SHARE = 0.25  # TPE's random start-up trials sized to the budget: this share of it (docs/sweeps.md)
STARTUP_MAX = 10  # Optuna's own default, for large budgets


def startup_trials(budget: int) -> int:
    """TPE's random start-up trials for a search of ``budget`` measured configs: a quarter of them, at least one
    (the model needs a point), at most Optuna's 10 (chosen on the sim: docs/sweeps.md, "A search worth its
    budget")."""
    return max(1, min(STARTUP_MAX, round(STARTUP_SHARE * budget)))


def make_sampler(spec: Mapping[str, Any] | None, budget: int | None = None) -> BaseSampler:
    """``{name: tpe|random, seed: N, n_startup_trials: N|auto, ...}`` -> a sampler (TPE by default).
    ``n_startup_trials: auto`` (the default) sizes TPE's random start to ``budget`` (``startup_trials``); without a
    budget it is Optuna's 10."""
    spec = dict(spec or {})
    name = str(spec.pop("name", "tpe"))
    seed = spec.pop("seed", None)
    if name == "tpe":
        startup = spec.pop("n_startup_trials", "auto")
        if str(startup) == "auto":
            startup = startup_trials(budget) if budget is not None else STARTUP_MAX
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=int(startup), **spec)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise SearchError(f"hydra.sweeper.sampler.name={name!r}: use tpe or random")


def make_pruner(spec: Mapping[str, Any] | None) -> BasePruner:
    """``{name: median|percentile|hyperband|none, ...keyword arguments}`` -> a pruner (median by default)."""
    spec = dict(spec or {})
    name = str(spec.pop("name", "median"))
    try:
        if name == "median":
            return optuna.pruners.MedianPruner(**spec)
        if name == "percentile":
            return optuna.pruners.PercentilePruner(**spec)
        if name == "hyperband":
            return optuna.pruners.HyperbandPruner(**spec)
        if name == "none":
            return optuna.pruners.NopPruner()
    except TypeError as exc:
        raise SearchError(f"hydra.sweeper.pruner: {exc}") from None
    raise SearchError(f"hydra.sweeper.pruner.name={name!r}: use median, percentile, hyperband or none")


def open_study(journal: str | Path, study_name: str) -> optuna.Study:
    """An existing study, with the pruner it was created with (for a job reporting into its trial)."""
    storage = open_storage(journal)
    summaries = {s.study_name: s for s in optuna.get_all_study_summaries(storage)}
    if study_name not in summaries:
        raise SearchError(f"no Optuna study {study_name!r} in the journal {journal}")
    spec = summaries[study_name].user_attrs.get(PRUNER_ATTR)
    return optuna.load_study(study_name=study_name, storage=storage, pruner=make_pruner(spec))


def frozen_trial(study: optuna.Study, number: int) -> optuna.trial.FrozenTrial:
    """The study's trial ``number`` as stored now (fresh from the journal: a job may have written to it)."""
    for trial in study.get_trials(deepcopy=False):
        if trial.number == number:
            return trial
    raise SearchError(f"study {study.study_name!r} has no trial {number}")


def trial_by_number(study: optuna.Study, number: int) -> optuna.Trial:
    """A live handle on trial ``number`` (to report intermediate values from the job's own process). Optuna
    has no public lookup by number; FrozenTrial keeps the storage id in ``_trial_id``."""
    return optuna.Trial(study, frozen_trial(study, number)._trial_id)


def tell_job(study: optuna.Study, trial: optuna.Trial, value: float | None, failed_value: float | None) -> TrialState:
    """Tell the result of the trial's job: PRUNED when the job says it was pruned, else its value; a job without a
    value (failed) is told ``failed_value`` (marked failed) or, when that is None, FAIL."""
    if frozen_trial(study, trial.number).user_attrs.get(PRUNED_ATTR) is not None:
        study.tell(trial, state=TrialState.PRUNED)
        return TrialState.PRUNED
    if value is not None and math.isfinite(value):
        study.tell(trial, float(value))
        return TrialState.COMPLETE
    if failed_value is not None:
        trial.set_user_attr(FAILED_ATTR, True)
        study.tell(trial, float(failed_value))
        return TrialState.COMPLETE
    study.tell(trial, state=TrialState.FAIL)
    return TrialState.FAIL
