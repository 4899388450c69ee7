"""A Hydra sweeper driven by Optuna (>= 4) through ask/tell, its study in a journal file.

    python -m kgbench -m backend=sim load=smoke hparams_search=optuna hydra.sweeper.n_trials=12

Each round the sweeper asks the study for ``n_jobs`` trials, turns their parameters into Hydra overrides, launches
them with the configured launcher and tells the study each job's return value (the job's req/s). Each job also gets
``++search.journal=... ++search.study=... ++search.trial=N``: it opens its own trial in the journal, reports an
intermediate value after every concurrency level (kgbench.search.trial), so the pruner can stop a poor config before
its last level, and writes its end (seconds, machine, failure); a job stopped by the pruner is told as PRUNED.

**A study per measuring condition** (kgbench.search.condition, kgbench.search.studies): the study is
``<study_name>-<digest of the condition and the space>``. The same command under the same condition, on any node,
continues it (more workers of one study); other fixed settings, load, binary, network, machine or engine give
another study, which measures its own jobs (``other_conditions: refuse``: refused, naming what differs); another
space under the same condition starts its own study and copies in, by value, what the same condition measured in
it. The search says which study it works on and why before any job.

``n_trials`` is the study's budget of measured configs: a worker stops asking once the study holds that many trials
that ran a job (from every worker), or once a finite space has none left. Repeats cost nothing
(kgbench.search.asking): a config measured already is told its result, a config running or failed is told FAIL, and
on a finite space the next proposal is the nearest config not tried yet. A failed job (its config did not start,
e.g. out of device memory) is told ``failed_value`` (0.0: the sampler avoids that region; null: FAIL), and is never a
measurement: never reused, never the best; it is not run again unless ``retry_failed`` (a failure that was not the
config's: the MLflow store or a node down). TPE's random start-up trials are sized to the budget.

**Faults** (kgbench.search.lease, kgbench.search.journal): every trial a sweeper runs is leased in the journal and
renewed while its job runs; a trial whose sweeper or node died is told FAIL (lost) by the next worker to ask, costs
no budget, and its config is measured again. Workers take turns to ask (the ask lock), so each config is measured
once; at the end a worker waits for the other workers' running trials, so every worker reports the same best.

The first trial is KataGo's own advice for throughput (``start: katago``, kgbench.search.start), enqueued on a study
that has not tried it yet (a start whose job died is enqueued again); ``budget_s`` caps the study's job-seconds as
``n_trials`` caps its measured configs (kgbench.search.budget).
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import optuna
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf
from optuna.study import StudyDirection
from optuna.trial import TrialState

from kgbench.search.asking import (
    ask_new,
    enqueue_start,
    measured_keys,
    measured_trials,
    requeue_failed,
    requeue_lost,
)
from kgbench.search.attrs import JOB_S_ATTR, LOST_ATTR, PRUNER_ATTR, is_copy
from kgbench.search.budget import jobs_that_fit, spent
from kgbench.search.condition import Condition, config_condition
from kgbench.search.describe import describe_search, plain, rewrite_keys
from kgbench.search.journal import JournalError, ask_lock, check_readable, check_writable, open_storage
from kgbench.search.lease import LeaseKeeper, reap_lost
from kgbench.search.outcome import summarise
from kgbench.search.space import SearchError, SearchSpace, parse_space
from kgbench.search.start import FACTORS, KATAGO, shown, start_params
from kgbench.search.studies import OTHER_CONDITIONS, choose_study, import_measured, mark_study
from kgbench.search.study import frozen_trial, make_pruner, make_sampler, tell_job
from kgbench.search.trial import trial_overrides

__all__ = ["OptunaSweeper", "SweepHooks", "describe_search", "rewrite_keys"]

log = logging.getLogger(__name__)

WAIT_POLL_S = 2.0  # how often a worker with nothing left to ask looks at the other workers' running trials


class SweepHooks(Protocol):
    """What the sweep around the search provides (kgbench.sweep.search_hooks, given by the Hydra plugin)."""

    def environment(self, config: DictConfig) -> tuple[dict[str, str], dict[str, str]]:
        """The condition's environment part (kgbench.search.condition) and what to show beside it."""
        ...

    def opened(self, config: DictConfig, jobs: int) -> None:
        """The search will run: open the sweep (its MLflow parent run, the progress bar)."""
        ...

    def refused(self, message: str) -> None:
        """The search cannot run: say why in one line; nothing is recorded."""
        ...


class _NoHooks:
    def environment(self, config: DictConfig) -> tuple[dict[str, str], dict[str, str]]:
        return {}, {}

    def opened(self, config: DictConfig, jobs: int) -> None:
        return None

    def refused(self, message: str) -> None:
        log.error("%s", message)


@dataclass
class _Plan:
    """A search that can run: its space, the study it works on, and what to say before the first job."""

    space: SearchSpace
    study: optuna.Study
    lines: list[str]
    start: dict[str, object] | None


class OptunaSweeper(Sweeper):
    def __init__(
        self,
        study_name: str,
        journal: str,
        direction: str = "maximize",
        n_trials: int = 20,
        n_jobs: int = 1,
        sampler: Mapping[str, Any] | None = None,
        pruner: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
        failed_value: float | None = 0.0,
        start: object = KATAGO,
        budget_s: float | None = None,
        lease_s: float = 120.0,
        other_conditions: str = "new",
        retry_failed: bool = False,
        hooks: SweepHooks | None = None,
    ) -> None:
        if direction not in ("maximize", "minimize"):
            raise SearchError(f"hydra.sweeper.direction={direction!r}: use maximize or minimize")
        if n_trials < 1 or n_jobs < 1:
            raise SearchError("hydra.sweeper.n_trials and hydra.sweeper.n_jobs must be >= 1")
        if not study_name or not journal:
            raise SearchError("hydra.sweeper.study_name and hydra.sweeper.journal must be set")
        if budget_s is not None and not (isinstance(budget_s, int | float) and budget_s > 0):
            raise SearchError(f"hydra.sweeper.budget_s={budget_s!r}: job-seconds > 0, or null (no budget)")
        if not (isinstance(lease_s, int | float) and lease_s >= 4):
            raise SearchError(f"hydra.sweeper.lease_s={lease_s!r}: seconds >= 4")
        if other_conditions not in OTHER_CONDITIONS:
            raise SearchError(f"hydra.sweeper.other_conditions={other_conditions!r}: use new or refuse")
        self.study_name = study_name
        self.journal = str(Path(journal).expanduser().resolve())
        self.direction = direction
        self.n_trials = n_trials
        self.n_jobs = n_jobs
        self.sampler_spec = plain(sampler)
        self.pruner_spec = plain(pruner)
        self.params = {str(k): str(v) for k, v in (params or {}).items()}
        self.failed_value = failed_value
        self.start = plain(start) if isinstance(start, Mapping) else start
        self.budget_s = None if budget_s is None else float(budget_s)
        self.lease_s = float(lease_s)
        self.other_conditions = other_conditions
        self.retry_failed = bool(retry_failed)
        self.hooks: SweepHooks = hooks or _NoHooks()
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.launcher: Launcher | None = None
        self.space: SearchSpace | None = None
        self._said: set[str] = set()

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.config = config
        self.hydra_context = hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    # -- before any job ------------------------------------------------------------------------------------------

    def _plan(self, arguments: list[str]) -> _Plan:
        """Everything that can refuse the search, before any job or MLflow run: the space, the start, the journal
        (writable, readable), the condition and the study it picks."""
        assert self.config is not None and self.hydra_context is not None
        groups = {*self.hydra_context.config_loader.list_groups(""), "hydra"}  # conf/ folders: group names
        space = parse_space([*rewrite_keys(self.params, groups), *arguments])
        if not space.distributions:
            raise SearchError("nothing to search: give hydra.sweeper.params or sweep overrides like x=choice(1,2)")
        known = {key: self.config.get(key) for key in FACTORS}  # the config's values, for keys not searched
        lines = describe_search(space, self.n_trials, self.sampler_spec, self.start, known, self.budget_s)
        journal = check_writable(self.journal)
        check_readable(journal)
        environment, shown_env = self.hooks.environment(self.config)
        condition = Condition.of(config_condition(self.config, space.distributions), environment, shown_env)
        storage = open_storage(journal)
        with ask_lock(journal):
            choice = choose_study(storage, self.study_name, condition, space, self.other_conditions)
            study = self._study(storage, choice.name)
            mark_study(study, self.study_name, condition, space)
            copied = import_measured(study, storage, choice.siblings, condition, space) if choice.siblings else []
        lines += [*choice.lines, f"  journal: {journal}"]
        if copied:
            lines.append(f"  copied in: {len(copied)} measured config(s) of this space ({', '.join(copied)})")
        return _Plan(space, study, lines, start_params(space, self.start, known))

    def _study(self, storage: optuna.storages.BaseStorage, name: str) -> optuna.Study:
        study = optuna.create_study(
            study_name=name,
            storage=storage,
            sampler=make_sampler(self.sampler_spec, self.n_trials),
            pruner=make_pruner(self.pruner_spec),
            direction=StudyDirection.MAXIMIZE if self.direction == "maximize" else StudyDirection.MINIMIZE,
            load_if_exists=True,
        )
        if study.direction.name.lower() != self.direction:
            raise SearchError(f"study {name!r} in {self.journal} exists with direction {study.direction.name.lower()}")
        study.set_user_attr(PRUNER_ATTR, self.pruner_spec)
        return study

    # -- the search ----------------------------------------------------------------------------------------------

    def sweep(self, arguments: list[str]) -> list[Sequence[JobReturn]]:
        assert self.config is not None and self.launcher is not None
        try:
            plan = self._plan(arguments)
        except SearchError as exc:
            self.hooks.refused(str(exc))
            return []
        self.space = plan.space
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        self.hooks.opened(self.config, self.n_trials)
        for line in plan.lines:
            log.info("%s", line)
        returns: list[Sequence[JobReturn]] = []
        try:
            with LeaseKeeper(plan.study._storage, self.lease_s) as keeper:
                self._search(plan, keeper, returns)
        except JournalError as exc:  # another worker's write broke the journal mid-search: stop, say where
            log.error("the search stops: %s", exc)
            return returns
        summarise(plan.study, plan.space, self.journal, self.budget_s, sweep_dir)
        return returns

    def _search(self, plan: _Plan, keeper: LeaseKeeper, returns: list[Sequence[JobReturn]]) -> None:
        study, space = plan.study, plan.space
        rng = random.Random(self.sampler_spec.get("seed"))
        job_index = 0
        with ask_lock(self.journal):
            self._tidy(study)
            if self.retry_failed:
                for number, params in requeue_failed(study):
                    log.info("trial %d's job failed: its config %s enqueued to be measured again "
                             "(hydra.sweeper.retry_failed)", number, shown(space, params))  # fmt: skip
            if measured_trials(study) < self.n_trials:  # a study whose budget is spent enqueues nothing
                self._enqueue_start(study, space, plan.start)
        while True:
            with ask_lock(self.journal):
                self._tidy(study)
                trials = self._ask_round(study, space, rng, keeper)
            if trials:
                batch = [self._job_overrides(space, trial) for trial in trials]
                self.validate_batch_is_legal(batch)
                launched = time.monotonic()
                assert self.launcher is not None
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
            assert self.space is not None
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
