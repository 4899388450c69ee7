"""The Optuna study a search works on: journal storage, sampler and pruner, shared by the sweeper and the jobs.

The study lives in Optuna's journal storage: one append-only file (``search.journal`` /
``hydra.sweeper.journal``), locked per write, so several sweeper processes on several nodes of a shared filesystem
can work on one study (each asks for trials and tells their results). The pruner's settings are kept in the study
(user attribute ``kgbench.pruner``) so that a job, in whatever process or node it runs, rebuilds the same pruner
when it opens its trial to report intermediate values.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna
from optuna.pruners import BasePruner
from optuna.samplers import BaseSampler
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from kgbench.search.space import SearchError, SearchSpace, trial_key

__all__ = ["FAILED_ATTR", "JOB_S_ATTR", "PRUNED_ATTR", "PRUNER_ATTR", "REUSED_ATTR", "ask_new", "enqueue_start",
           "frozen_trial", "make_pruner", "make_sampler", "measured_keys", "measured_trials", "open_storage",
           "open_study", "reuse_earlier", "startup_trials", "tell_job", "trial_by_number"]  # fmt: skip

PRUNER_ATTR = "kgbench.pruner"  # study: the pruner's settings, for the jobs
PRUNED_ATTR = "kgbench.pruned_at_step"  # trial: set by the job when the pruner stopped it
REUSED_ATTR = "kgbench.reused_from"  # trial: same params as this earlier trial, whose result it was told
FAILED_ATTR = "kgbench.failed"  # trial: its job failed, told as the failed value
JOB_S_ATTR = "kgbench.job_s"  # trial: its job's wall seconds (set by the job; by the sweeper if the job could not)


def open_storage(journal: str | Path) -> JournalStorage:
    """The journal file's storage (its folder is created); the path should be on a filesystem every worker sees."""
    path = Path(journal).expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    return JournalStorage(JournalFileBackend(str(path)))


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


def measured_trials(study: optuna.Study) -> int:
    """Trials that measured (or are measuring) a config: what the budget counts. A trial that repeated a measured
    config and was told its result (``kgbench.reused_from``) costs nothing, and an enqueued one that no worker asked
    for yet (WAITING: a start point) has measured nothing."""
    trials = study.get_trials(deepcopy=False)
    return sum(REUSED_ATTR not in t.user_attrs and t.state != TrialState.WAITING for t in trials)


def measured_keys(study: optuna.Study) -> set[tuple[object, ...]]:
    """The configs (``trial_key``) measured or being measured, whatever came of them."""
    return {trial_key(t.params) for t in study.get_trials(deepcopy=False) if REUSED_ATTR not in t.user_attrs}


def enqueue_start(study: optuna.Study, params: Mapping[str, object]) -> int | None:
    """Enqueue ``params`` (a start point, maybe partial: the sampler draws the other keys) as the next trial, unless
    a trial already agrees with it on every one of its keys (measured, running, or enqueued and not asked yet; a
    reused trial does not count): then that trial's number, nothing enqueued (a study continued, or another
    worker's, does not measure its start twice)."""
    for trial in study.get_trials(deepcopy=False):
        if REUSED_ATTR in trial.user_attrs:
            continue
        # an enqueued trial no worker asked for yet has no params, only the fixed ones Optuna keeps for it
        held = trial.system_attrs.get("fixed_params", {}) if trial.state == TrialState.WAITING else trial.params
        if held and all(held.get(name) == value for name, value in params.items()):
            return trial.number
    study.enqueue_trial(dict(params), skip_if_exists=False)
    return None


def _pending_twin(study: optuna.Study, trial: optuna.Trial) -> int | None:
    """An earlier trial with the same params that is still running (asked in this round, or by another worker)."""
    for other in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if other.number != trial.number and other.params == trial.params and REUSED_ATTR not in other.user_attrs:
            return other.number
    return None


def ask_new(
    study: optuna.Study, space: SearchSpace, rng: random.Random, max_repeats: int = 200
) -> tuple[optuna.Trial | None, list[tuple[int, int]]]:
    """A trial whose config is not measured yet, and the (trial, earlier trial) pairs of the repeats met on the way.

    A proposal that repeats a measured config is told that config's result (``reuse_earlier``: the sampler learns
    it again, no job runs, the budget is not used); on a finite space the next proposal is then the nearest config
    not measured yet (enqueued), so the space is sampled without repeats. None when a finite space has no config
    left, or a continuous one kept repeating ``max_repeats`` times."""
    reused: list[tuple[int, int]] = []
    for _ in range(max_repeats):
        trial = study.ask(space.distributions)
        if reuse_earlier(study, trial):
            reused.append((trial.number, int(trial.user_attrs[REUSED_ATTR])))
        elif (twin := _pending_twin(study, trial)) is not None:
            trial.set_user_attr(REUSED_ATTR, twin)  # its twin's result is not known yet: told FAIL, ignored
            study.tell(trial, state=TrialState.FAIL)
            reused.append((trial.number, twin))
        else:
            return trial, reused
        if space.size is not None:
            nearest = space.nearest_unmeasured(trial.params, measured_keys(study), rng)
            if nearest is None:
                return None, reused
            study.enqueue_trial(nearest, skip_if_exists=False)
    return None, reused
