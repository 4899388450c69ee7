"""Which trial a search asks next, and what each trial counts: no config measured twice, a failed job's value never
passed on, a lost job's config measured again, the start never lost.

- A proposal that repeats a **measured** config (kgbench.search.attrs.is_measured) is told that result
  (``kgbench.reused_from``): no job, no budget. One that repeats a config a job is measuring now (this worker's or
  another's) or whose job **failed** is told FAIL (the sampler ignores it; the failed trial itself taught the sampler
  ``failed_value``), never a value: a failure is not a measurement, and no trial reports it as one.
- On a finite space the next proposal is then the nearest config not tried yet (``SearchSpace.nearest_unmeasured``).
- A **lost** trial (its job died, kgbench.search.lease) costs none of ``n_trials`` and its config is enqueued again
  (``requeue_lost``), once: a config lost twice may be what kills its node, and is not run a third time.
- The start (kgbench.search.start) is enqueued unless a trial that ran or will run a job holds it; a lost one does
  not count, so a start whose job died is enqueued again.
- ``hydra.sweeper.retry_failed=true`` (``requeue_failed``): the failed configs are measured again, once per search
  that asks it (a failure that was not the config's: the MLflow store or a node down).

The sweepers of one journal call these holding the ask lock (kgbench.search.journal.ask_lock), one at a time, so
the config one is about to measure is running in the journal before another asks.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from typing import Literal

import optuna
from optuna.trial import FrozenTrial, TrialState

from kgbench.search.attrs import (
    RETRIED_ATTR,
    REUSED_ATTR,
    VALUES_ATTR,
    is_copy,
    is_failed,
    is_lost,
    is_measured,
)
from kgbench.search.space import SearchSpace, trial_key

__all__ = ["Repeat", "ask_new", "best_measured", "enqueue_start", "measured_keys", "measured_trials",
           "requeue_failed", "requeue_lost", "reuse_earlier"]  # fmt: skip

LOSSES_BEFORE_GIVING_UP = 2  # a config whose job died this many times is not run again
Repeat = tuple[int, int, Literal["reused", "running", "failed"]]  # (trial, earlier trial, what the earlier one is)


def _trials(study: optuna.Study) -> list[FrozenTrial]:
    return study.get_trials(deepcopy=False)


def _void(study: optuna.Study) -> set[int]:
    """The trials the study no longer counts as having tried their configs: lost, or failed and retried."""
    retried = study.user_attrs.get(RETRIED_ATTR) or []
    return {t.number for t in _trials(study) if is_lost(t)} | {int(n) for n in retried}


def reuse_earlier(study: optuna.Study, trial: optuna.Trial) -> bool:
    """Tell ``trial`` the result of an earlier trial that measured the same params, if any (no job needs to run): a
    search on a budget does not measure a config twice. A failed job's value is never passed on."""
    for earlier in _trials(study):
        if earlier.number == trial.number or earlier.params != trial.params or REUSED_ATTR in earlier.user_attrs:
            continue
        if is_measured(earlier):
            trial.set_user_attr(REUSED_ATTR, earlier.number)
            if earlier.state == TrialState.PRUNED:
                study.tell(trial, state=TrialState.PRUNED)
            else:
                study.tell(trial, earlier.value)
            return True
    return False


def _unmeasured_twin(study: optuna.Study, trial: optuna.Trial) -> Repeat | None:
    """An earlier trial with the same params whose job runs now (no result yet) or failed: ``trial`` is told FAIL."""
    void = _void(study)
    for other in _trials(study):
        if other.number == trial.number or other.params != trial.params or is_copy(other) or other.number in void:
            continue
        if other.state == TrialState.RUNNING:
            return trial.number, other.number, "running"
        if is_failed(other):
            return trial.number, other.number, "failed"
    return None


def measured_trials(study: optuna.Study) -> int:
    """Trials that measured (or are measuring) a config: what ``n_trials`` counts. A copy (reused, imported) ran no
    job, an enqueued one that no worker asked for yet (WAITING: a start, a lost config) has measured nothing, and a
    lost one's job died (a failed one retried: its config is measured again)."""
    void = _void(study)
    return sum(not is_copy(t) and t.number not in void and t.state != TrialState.WAITING for t in _trials(study))


def _losses(study: optuna.Study) -> Counter[tuple[object, ...]]:
    return Counter(trial_key(t.params) for t in _trials(study) if is_lost(t) and t.params)


def measured_keys(study: optuna.Study) -> set[tuple[object, ...]]:
    """The configs (``trial_key``) tried or being tried, whatever came of them (a lost one only once it was lost as
    often as the search tries a config)."""
    void = _void(study)
    tried = {trial_key(t.params) for t in _trials(study) if t.number not in void and t.state != TrialState.WAITING}
    given_up = {key for key, count in _losses(study).items() if count >= LOSSES_BEFORE_GIVING_UP}
    return tried | given_up


def _held(trial: FrozenTrial) -> Mapping[str, object]:
    """The params a trial runs or will run: an enqueued trial no worker asked for yet has only the fixed ones."""
    return trial.system_attrs.get("fixed_params", {}) if trial.state == TrialState.WAITING else trial.params


def enqueue_start(study: optuna.Study, params: Mapping[str, object]) -> int | None:
    """Enqueue ``params`` (a start point, maybe partial: the sampler draws the other keys) as the next trial, unless
    a trial already agrees with it on every one of its keys (measured, copied in from a study of the same condition,
    failed, running, or enqueued and not asked yet; a reused copy or a lost one does not count): then that trial's
    number, nothing enqueued (a study continued, or another worker's, does not measure its start twice; a start whose
    job died is measured again)."""
    void = _void(study)
    for trial in _trials(study):
        if REUSED_ATTR in trial.user_attrs or trial.number in void:
            continue
        held = _held(trial)
        if held and all(held.get(name) == value for name, value in params.items()):
            return trial.number
    study.enqueue_trial(dict(params), skip_if_exists=False)
    return None


def requeue_lost(study: optuna.Study) -> tuple[list[tuple[int, dict[str, object]]], list[int]]:
    """Enqueue the config of every lost trial that no other trial ran, runs or will run: (lost trial, params) of
    each enqueued, and the lost trials whose config died ``LOSSES_BEFORE_GIVING_UP`` times (not enqueued again)."""
    trials = _trials(study)
    losses = _losses(study)
    void = _void(study)
    covered = {trial_key(_held(t)) for t in trials if not is_copy(t) and t.number not in void}
    enqueued: list[tuple[int, dict[str, object]]] = []
    given_up: list[int] = []
    for trial in trials:
        if not is_lost(trial) or not trial.params:
            continue
        key = trial_key(trial.params)
        if losses[key] >= LOSSES_BEFORE_GIVING_UP:
            given_up.append(trial.number)
        elif key not in covered:
            study.enqueue_trial(dict(trial.params), skip_if_exists=False)
            covered.add(key)
            enqueued.append((trial.number, dict(trial.params)))
    return enqueued, given_up


def requeue_failed(study: optuna.Study) -> list[tuple[int, dict[str, object]]]:
    """``hydra.sweeper.retry_failed``: every failed trial not retried yet is recorded as retried (the study's
    ``kgbench.retried``: void, no longer a tried config) and its config enqueued, unless another trial ran, runs or
    will run it; the (failed trial, params) of each enqueued. For failures that were not the config's (a store or a
    node down). Hold the ask lock (the list is read, extended and written back)."""
    trials, void = _trials(study), _void(study)
    failed = [t for t in trials if is_failed(t) and t.number not in void and t.params]
    if not failed:
        return []
    covered = {trial_key(_held(t)) for t in trials if not is_copy(t) and t.number not in void and not is_failed(t)}
    enqueued: list[tuple[int, dict[str, object]]] = []
    for trial in failed:
        if (key := trial_key(trial.params)) not in covered:
            study.enqueue_trial(dict(trial.params), skip_if_exists=False)
            covered.add(key)
            enqueued.append((trial.number, dict(trial.params)))
    retried = sorted({*(int(n) for n in study.user_attrs.get(RETRIED_ATTR) or []), *(t.number for t in failed)})
    study.set_user_attr(RETRIED_ATTR, retried)
    return enqueued


def ask_new(
    study: optuna.Study, space: SearchSpace, rng: random.Random, max_repeats: int = 200
) -> tuple[optuna.Trial | None, list[Repeat]]:
    """A trial whose config is not tried yet, and the repeats met on the way (``Repeat``).

    A proposal that repeats a measured config is told that config's result (``reuse_earlier``: the sampler learns
    it again, no job runs, the budget is not used); one that repeats a running or failed config is told FAIL. On a
    finite space the next proposal is then the nearest config not tried yet (enqueued), so the space is sampled
    without repeats. The trial asked records the values its job runs (``kgbench.values``: a study of another space
    reads them, not the params). None when a finite space has no config left, or a continuous one kept repeating
    ``max_repeats`` times."""
    repeats: list[Repeat] = []
    for _ in range(max_repeats):
        trial = study.ask(space.distributions)
        if reuse_earlier(study, trial):
            repeats.append((trial.number, int(trial.user_attrs[REUSED_ATTR]), "reused"))
        elif (twin := _unmeasured_twin(study, trial)) is not None:
            trial.set_user_attr(REUSED_ATTR, twin[1])  # no value to pass on: told FAIL, ignored by the sampler
            study.tell(trial, state=TrialState.FAIL)
            repeats.append(twin)
        else:
            trial.set_user_attr(VALUES_ATTR, space.values(trial.params))
            return trial, repeats
        if space.size is not None:
            nearest = space.nearest_unmeasured(trial.params, measured_keys(study), rng)
            if nearest is None:
                return None, repeats
            study.enqueue_trial(nearest, skip_if_exists=False)
    return None, repeats


def best_measured(study: optuna.Study) -> FrozenTrial | None:
    """The best trial whose value a job measured (here, or in a study of the same condition it was copied from): a
    failed, lost or pruned trial never, nor a reused copy (its original is the one reported)."""
    done = [t for t in _trials(study) if is_measured(t) and t.state == TrialState.COMPLETE]
    done = [t for t in done if REUSED_ATTR not in t.user_attrs and t.value is not None]
    if not done:
        return None
    sign = 1.0 if study.direction == optuna.study.StudyDirection.MAXIMIZE else -1.0
    return min(done, key=lambda t: (-sign * float(t.value or 0.0), t.number))  # the best value, the earliest
