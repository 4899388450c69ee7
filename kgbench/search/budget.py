"""A search's budget in job-seconds (``hydra.sweeper.budget_s``): what the study's jobs spent, and how many more fit.

Each job writes its own wall seconds into its trial (``kgbench.job_s``, kgbench.search.trial.record_job_end):
the job knows its span whatever launched it (the sweeper's own process, a PBS job on another node), and the study
in the shared journal then holds every worker's spending, so the budget is the study's, as ``n_trials`` is. A
sweeper that times its launches could not tell one job's seconds from another's when ``n_jobs`` run at once, and
under PBS its clock would count the queue; it only fills in a job that wrote nothing (killed, journal not
writable) with the batch's wall seconds, an upper bound.

The rule: before each round, the jobs that fit are those whose seconds, at the longest job's seconds so far, keep
the spent seconds (jobs done, plus jobs other workers are running, at the longest) within the budget. The longest,
not the mean: the budget is a ceiling the user pays for (GPU-hours), and at the mean any last job longer than the
mean would end past it; at the longest only a job longer than every one before it can, by the difference. Before
any job is done nothing is known: the first round runs, so a budget smaller than two jobs measures one config.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import optuna
from optuna.trial import TrialState

from kgbench.search.attrs import JOB_S_ATTR, is_copy

__all__ = ["Spent", "jobs_that_fit", "spent"]


@dataclass(frozen=True)
class Spent:
    seconds: float  # the jobs' seconds, summed
    jobs: int  # jobs done that said their seconds
    running: int  # trials running a job that has not said them yet (this worker's or another's)
    longest_s: float = 0.0  # the longest of those jobs

    @property
    def mean_s(self) -> float | None:
        return self.seconds / self.jobs if self.jobs else None


def spent(study: optuna.Study) -> Spent:
    """The study's job-seconds so far (from every worker's trials)."""
    seconds, jobs, running, longest = 0.0, 0, 0, 0.0
    for trial in study.get_trials(deepcopy=False):
        if is_copy(trial):
            continue
        value = trial.user_attrs.get(JOB_S_ATTR)
        if isinstance(value, int | float) and math.isfinite(value):
            seconds += float(value)
            jobs += 1
            longest = max(longest, float(value))
        elif trial.state == TrialState.RUNNING:
            running += 1
    return Spent(seconds, jobs, running, longest)


def jobs_that_fit(so_far: Spent, budget_s: float | None, wanted: int) -> int:
    """How many of ``wanted`` more jobs the budget allows (all of them without a budget, or before any job is done)."""
    longest = so_far.longest_s
    if budget_s is None or so_far.jobs == 0 or longest <= 0:
        return wanted
    room = budget_s - so_far.seconds - so_far.running * longest
    return max(0, min(wanted, math.floor(room / longest + 1e-9)))
