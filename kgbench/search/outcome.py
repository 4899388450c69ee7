"""The end of a search: what its study holds, its best *measured* trial, and ``optimization_results.yaml``.

Every worker of a study reports the study (all workers' trials), so two sweepers that wait for each other's last
jobs (kgbench.search.optuna_sweeper) print the same best trial. The best is a value a job measured: a failed job
(told ``failed_value`` for the sampler), a lost one and a reused copy never are (kgbench.search.asking.best_measured).
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

import optuna
from omegaconf import OmegaConf
from optuna.trial import FrozenTrial, TrialState

from kgbench.search.asking import best_measured
from kgbench.search.attrs import (
    FAILURE_ATTR,
    IMPORTED_ATTR,
    LOST_ATTR,
    MACHINE_ATTR,
    RETRIED_ATTR,
    REUSED_ATTR,
    is_copy,
    is_failed,
    is_lost,
)
from kgbench.search.budget import spent
from kgbench.search.space import SearchSpace

__all__ = ["counts", "summarise"]

log = logging.getLogger(__name__)


def counts(trials: list[FrozenTrial]) -> dict[str, int]:
    """Trials by what they are: measured to the end (complete), pruned, failed, lost, reused (told a measured
    config's result), repeats (of a running or failed config: told FAIL), imported, running."""
    kinds: Counter[str] = Counter()
    for t in trials:
        if REUSED_ATTR in t.user_attrs:
            kinds["reused" if t.state != TrialState.FAIL else "repeats"] += 1
        elif IMPORTED_ATTR in t.user_attrs:
            kinds["imported"] += 1
        elif is_lost(t):
            kinds["lost"] += 1
        elif is_failed(t):
            kinds["failed"] += 1
        elif t.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING):
            kinds[t.state.name.lower()] += 1
    kinds_shown = ("complete", "pruned", "failed", "lost", "reused", "repeats", "imported", "running")
    return {k: kinds[k] for k in kinds_shown}


def _listed(trials: list[FrozenTrial], attr: str) -> dict[int, Any]:
    return {t.number: t.user_attrs[attr] for t in trials if attr in t.user_attrs}


def summarise(
    study: optuna.Study, space: SearchSpace | None, journal: str, budget_s: float | None, sweep_dir: Path
) -> dict[str, Any]:
    """Log the study's end (copies, failures, losses, machines, the best measured trial) and write
    ``optimization_results.yaml``; returns what it wrote."""
    trials = study.get_trials(deepcopy=False)
    tally = counts(trials)
    so_far = spent(study)
    failed_repeats = {t.number for t in trials if REUSED_ATTR in t.user_attrs and t.state == TrialState.FAIL}
    told = _listed(trials, REUSED_ATTR)  # repeats: of a measured config (its value), or of a running or failed one
    reused = {n: e for n, e in told.items() if n not in failed_repeats}
    unmeasured = {n: e for n, e in told.items() if n in failed_repeats}
    imported = _listed(trials, IMPORTED_ATTR)
    failed = {t.number: t.user_attrs.get(FAILURE_ATTR, "no reason recorded") for t in trials if is_failed(t)}
    lost = _listed(trials, LOST_ATTR)
    machines = Counter(
        str(t.user_attrs[MACHINE_ATTR]) for t in trials if MACHINE_ATTR in t.user_attrs and not is_copy(t)
    )
    results: dict[str, Any] = {"study_name": study.study_name, "journal": journal, "trials": tally,
                               "reused_from": reused, "repeats_told_fail": unmeasured, "imported_from": imported,
                               "failed": failed, "lost": lost, "machines": dict(machines),
                               "job_seconds": round(so_far.seconds, 1), "budget_s": budget_s}  # fmt: skip
    seconds = f"{so_far.seconds:.1f} job-seconds" + (f" of {budget_s:g}" if budget_s else "")
    if reused:
        shown = ", ".join(f"{number} (of {earlier})" for number, earlier in sorted(reused.items()))
        log.info("reused a measured result, no job: trials %s", shown)
    if unmeasured:
        shown = ", ".join(f"{number} (of {earlier})" for number, earlier in sorted(unmeasured.items()))
        log.info("repeated a config running or failed, told FAIL, no job, no value: trials %s", shown)
    if imported:
        log.info("copied from studies of the same conditions, no job: %s",
                 ", ".join(f"{number} (of {source})" for number, source in sorted(imported.items())))  # fmt: skip
    retried = set(study.user_attrs.get(RETRIED_ATTR) or [])
    for number, why in sorted(failed.items()):
        again = "; its config measured again (retry_failed)" if number in retried else ""
        log.info("trial %d: its job failed (%s): not a measurement, never reused or reported as the best%s", number,
                 why, again)  # fmt: skip
    if len(machines) > 1:
        log.warning("the study's jobs ran on %d machines (%s): their figures do not compare; keep a study to one "
                    "(cluster.queue, or one study per node type)", len(machines),
                    ", ".join(f"{m}: {n}" for m, n in machines.items()))  # fmt: skip
    best = best_measured(study)
    if best is None:
        log.warning("Optuna study %r: no trial measured a value (%s; %s)", study.study_name, tally, seconds)
    else:
        params = space.values(best.params) if space is not None else best.params
        source = f", copied from {best.user_attrs[IMPORTED_ATTR]}" if IMPORTED_ATTR in best.user_attrs else ""
        results.update(best_value=best.value, best_params=params, best_trial=best.number)
        log.info("Best trial %d%s: %s -> %.4g (%s; %s)", best.number, source, params, best.value, tally, seconds)
    OmegaConf.save(OmegaConf.create(results), sweep_dir / "optimization_results.yaml")
    return results
