"""The Optuna study a search works on: journal storage, sampler and pruner, shared by the sweeper and the jobs.

The study lives in Optuna's journal storage: one append-only file (``search.journal`` /
``hydra.sweeper.journal``), locked per write, so several sweeper processes on several nodes of a shared filesystem
can work on one study (each asks for trials and tells their results). The pruner's settings are kept in the study
(user attribute ``kgbench.pruner``) so that a job, in whatever process or node it runs, rebuilds the same pruner
when it opens its trial to report intermediate values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna
from optuna.pruners import BasePruner
from optuna.samplers import BaseSampler
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

__all__ = ["FAILED_ATTR", "PRUNED_ATTR", "PRUNER_ATTR", "REUSED_ATTR", "SearchError", "frozen_trial", "make_pruner",
           "make_sampler", "open_storage", "open_study", "reuse_earlier", "tell_job", "trial_by_number"]  # fmt: skip

PRUNER_ATTR = "kgbench.pruner"  # study: the pruner's settings, for the jobs
PRUNED_ATTR = "kgbench.pruned_at_step"  # trial: set by the job when the pruner stopped it
REUSED_ATTR = "kgbench.reused_from"  # trial: same params as this earlier trial, whose result it was told
FAILED_ATTR = "kgbench.failed"  # trial: its job failed, told as the failed value


class SearchError(ValueError):
    """A search setting that cannot work (one line, names the setting)."""


def open_storage(journal: str | Path) -> JournalStorage:
    """The journal file's storage (its folder is created); the path should be on a filesystem every worker sees."""
    path = Path(journal).expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    return JournalStorage(JournalFileBackend(str(path)))


def make_sampler(spec: Mapping[str, Any] | None) -> BaseSampler:
    """``{name: tpe|random, seed: N, n_startup_trials: N}`` -> a sampler (TPE by default)."""
    spec = dict(spec or {})
    name = str(spec.pop("name", "tpe"))
    seed = spec.pop("seed", None)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, **spec)
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


def reuse_earlier(study: optuna.Study, trial: optuna.Trial) -> bool:
    """Tell ``trial`` the result of an earlier trial with the same params, if any (then no job needs to run):
    a search on a budget does not measure a config twice."""
    for earlier in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)):
        if earlier.params == trial.params:
            trial.set_user_attr(REUSED_ATTR, earlier.number)
            if earlier.state == TrialState.PRUNED:
                study.tell(trial, state=TrialState.PRUNED)
            else:
                study.tell(trial, earlier.value)
            return True
    return False


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
