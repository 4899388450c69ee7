"""The rounds of an Optuna search (kgbench.search.optuna_sweeper's loop): each round asks the study for its trials
under the ask lock, launches their jobs with the sweep's launcher and tells the study each result; lost trials are
reaped and their configs enqueued again, repeats cost nothing (kgbench.search.asking), the budgets of measured configs
and of job-seconds stop it, and at the end a worker waits for the other workers' running trials. The sweeper plans
the search (space, journal, study) and hands this its study; nothing here refuses a search.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable, Sequence

import optuna
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.launcher import Launcher
from optuna.trial import TrialState

from kgbench.search.asking import (
    ask_new,
    enqueue_start,
    measured_keys,
    measured_trials,
    requeue_failed,
    requeue_lost,
)
from kgbench.search.attrs import JOB_S_ATTR, LOST_ATTR, is_copy
from kgbench.search.budget import jobs_that_fit, spent
from kgbench.search.journal import ask_lock
from kgbench.search.lease import LeaseKeeper, reap_lost
from kgbench.search.space import SearchSpace
from kgbench.search.start import shown
from kgbench.search.study import frozen_trial, tell_job
from kgbench.search.trial import trial_overrides

__all__ = ["WAIT_POLL_S", "SearchRounds"]

log = logging.getLogger("kgbench.search.optuna_sweeper")  # the search's one log, as before the split

WAIT_POLL_S = 2.0  # how often a worker with nothing left to ask looks at the other workers' running trials


class SearchRounds:
    """One worker's search on one study, from its first ask to its last tell."""

    def __init__(
        self,
        study: optuna.Study,
        space: SearchSpace,
        launcher: Launcher,
        journal: str,
        keeper: LeaseKeeper,
        *,
        n_trials: int,
        n_jobs: int,
        budget_s: float | None,
        lease_s: float,
        failed_value: float | None,
        retry_failed: bool,
        seed: int | None,
        validate: Callable[[Sequence[Sequence[str]]], None],
    ) -> None:
        self.study = study
        self.space = space
        self.launcher = launcher
        self.journal = journal
        self.keeper = keeper  # the leases of this worker's running trials
        self.n_trials = n_trials  # the study's budget of measured configs
        self.n_jobs = n_jobs  # trials a round
        self.budget_s = budget_s
        self.lease_s = lease_s
        self.failed_value = failed_value
        self.retry_failed = retry_failed
        self.seed = seed  # the sampler's seed: also the nearest-unmeasured choice's
        self.validate = validate  # Hydra's check of a batch of overrides
        self._said: set[str] = set()

    def run(self, start: dict[str, object] | None, returns: list[Sequence[JobReturn]]) -> None:
        """Rounds until the budget is spent, the space exhausted, or no worker runs a trial any more; each round's
        job returns appended to ``returns``. ``start``: the first trial's params (kgbench.search.start), if any."""
        study, space, keeper = self.study, self.space, self.keeper
        rng = random.Random(self.seed)
        job_index = 0
        with ask_lock(self.journal):
            self._tidy(study)
            if self.retry_failed:
                for number, params in requeue_failed(study):
                    log.info("trial %d's job failed: its config %s enqueued to be measured again "
                             "(hydra.sweeper.retry_failed)", number, shown(space, params))  # fmt: skip
            if measured_trials(study) < self.n_trials:  # a study whose budget is spent enqueues nothing
                self._enqueue_start(study, space, start)
        while True:
            with ask_lock(self.journal):
                self._tidy(study)
                trials = self._ask_round(study, space, rng, keeper)
            if trials:
                batch = [self._job_overrides(space, trial) for trial in trials]
                self.validate(batch)
                launched = time.monotonic()
                results = self.launcher.launch(batch, initial_job_idx=job_index)
                batch_s = time.monotonic() - launched
                job_index += len(batch)
                for trial, result in zip(trials, results, strict=True):
                    self._tell(study, trial, result, batch_s, keeper)
                returns.append(results)
            elif (others := self._others_running(study, keeper)) is not None:
                self._say(f"wait:{others}", f"trials {others} run in other workers: waiting for them, so that "
                          "every worker reports the same best (a lost one is measured here)")  # fmt: skip
                time.sleep(WAIT_POLL_S)
            else:
                return

    def _tidy(self, study: optuna.Study) -> None:
        """Trials whose sweeper or node died: told FAIL (lost), their configs enqueued to be measured again."""
        for number, why in reap_lost(study, self.lease_s):
            log.warning("trial %d was lost: %s; told FAIL, its config is measured again", number, why)
        enqueued, given_up = requeue_lost(study)
        for number, params in enqueued:
            log.info("trial %d's config %s enqueued to be measured again", number, shown(self.space, params))
        for number in given_up:
            self._say(f"given-up:{number}", f"trial {number}'s config was lost twice: not run again (it may be what "
                      "kills its node)")  # fmt: skip

    def _ask_round(
        self, study: optuna.Study, space: SearchSpace, rng: random.Random, keeper: LeaseKeeper
    ) -> list[optuna.Trial]:
        """This round's trials, each leased before the ask lock is let go; [] when nothing is left to ask."""
        left = self.n_trials - measured_trials(study)
        if left <= 0:
            return []
        if (fit := self._jobs_within_budget(study, min(self.n_jobs, left))) == 0:
            return []
        trials = []
        if space.size is not None and space.nearest_unmeasured({}, measured_keys(study), rng) is None:
            fit = 0  # every config tried: asking would only add repeats
        for _ in range(fit):
            trial, repeats = ask_new(study, space, rng)
            for number, earlier, kind in repeats:
                if kind == "reused":
                    log.info("trial %d repeats trial %d's config: its result reused, no job, no budget used",
                             number, earlier)  # fmt: skip
                else:
                    what = "runs now" if kind == "running" else "failed"
                    log.info("trial %d repeats trial %d's config, whose job %s: no value to reuse, told FAIL, no job",
                             number, earlier, what)  # fmt: skip
            if trial is None:
                break
            keeper.hold(trial._trial_id)
            trials.append(trial)
        if not trials:
            if space.size is not None:
                self._say("exhausted", f"every config of the space is measured ({space.size} configs): the search "
                          "stops")  # fmt: skip
            else:  # a continuous space: the sampler kept proposing measured configs
                self._say("exhausted", "the sampler proposed only configs already measured: the search stops")
        return trials

    def _others_running(self, study: optuna.Study, keeper: LeaseKeeper) -> str | None:
        """The numbers of the trials other workers are running ("4, 7"), or None."""
        held = keeper.held()
        running = [t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                   if t._trial_id not in held and not is_copy(t)]  # fmt: skip
        return ", ".join(map(str, running)) if running else None

    def _say(self, key: str, message: str) -> None:
        """Log ``message`` once per search (a worker waiting for others goes round its loop many times)."""
        if key not in self._said:
            self._said.add(key)
            log.info("%s", message)

    def _job_overrides(self, space: SearchSpace, trial: optuna.Trial) -> list[str]:
        return [*space.overrides(trial.params), *trial_overrides(self.journal, trial.study.study_name, trial.number)]

    def _enqueue_start(self, study: optuna.Study, space: SearchSpace, params: dict[str, object] | None) -> None:
        if params is None:
            return
        start = shown(space, params)
        if (earlier := enqueue_start(study, params)) is not None:
            log.info("start %s: trial %d has it already (measured, running or enqueued), not enqueued", start, earlier)
        else:
            log.info("start %s: enqueued as the next trial", start)

    def _jobs_within_budget(self, study: optuna.Study, wanted: int) -> int:
        """How many jobs the job-second budget allows this round (``wanted`` without one); 0 logs why it stops."""
        so_far = spent(study)
        fit = jobs_that_fit(so_far, self.budget_s, wanted)
        if fit == 0:
            self._say("budget_s", f"job-seconds: {so_far.seconds:.0f} spent by {so_far.jobs} job(s), the longest "
                      f"{so_far.longest_s:.0f} s; another would pass hydra.sweeper.budget_s={self.budget_s:g}: the "
                      "search stops")  # fmt: skip
        return fit

    def _tell(
        self, study: optuna.Study, trial: optuna.Trial, result: JobReturn, batch_s: float, keeper: LeaseKeeper
    ) -> None:
        keeper.release(trial._trial_id)
        frozen = frozen_trial(study, trial.number)
        if frozen.state.is_finished():  # another worker took it for lost while its job ran (a lease ran out)
            log.warning("trial %d was told %s by another worker while its job ran (%s): its result is not told",
                        trial.number, frozen.state.name, frozen.user_attrs.get(LOST_ATTR, "no reason"))  # fmt: skip
            return
        value = result.return_value if result.status == JobStatus.COMPLETED else None
        number = float(value) if isinstance(value, int | float) else None
        ended = JOB_S_ATTR in frozen.user_attrs  # the job wrote its end: it was not lost
        if not ended:  # killed, or the journal not writable from its node: the batch's seconds, an upper bound
            trial.set_user_attr(JOB_S_ATTR, round(batch_s, 3))
        if not ended and (number is None or not math.isfinite(number)):
            why = ("its job ended without writing its end: its process or node was lost (killed, walltime, "
                   "preemption, node failure)")  # fmt: skip
            trial.set_user_attr(LOST_ATTR, why)
            study.tell(trial, state=TrialState.FAIL)
            log.warning("trial %d was lost: %s; its config is measured again", trial.number, why)
            return
        tell_job(study, trial, number, self.failed_value)
