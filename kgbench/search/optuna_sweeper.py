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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import optuna
from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf
from optuna.study import StudyDirection

from kgbench.search.attrs import PRUNER_ATTR
from kgbench.search.condition import Condition, config_condition
from kgbench.search.describe import describe_search, plain, rewrite_keys
from kgbench.search.journal import JournalError, ask_lock, check_readable, check_writable, open_storage
from kgbench.search.lease import LeaseKeeper
from kgbench.search.outcome import summarise
from kgbench.search.rounds import SearchRounds
from kgbench.search.space import SearchError, SearchSpace, parse_space
from kgbench.search.start import FACTORS, KATAGO, start_params
from kgbench.search.studies import OTHER_CONDITIONS, choose_study, import_measured, mark_study
from kgbench.search.study import make_pruner, make_sampler

__all__ = ["OptunaSweeper", "SweepHooks", "describe_search", "rewrite_keys"]

log = logging.getLogger(__name__)


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
    """Plans the search (its space, journal, condition and study: everything that can refuse it, before any job)
    and runs it: the rounds of asks, jobs and tells are kgbench.search.rounds'."""

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
                rounds = SearchRounds(
                    plan.study, plan.space, self.launcher, self.journal, keeper,
                    n_trials=self.n_trials, n_jobs=self.n_jobs, budget_s=self.budget_s, lease_s=self.lease_s,
                    failed_value=self.failed_value, retry_failed=self.retry_failed, seed=self.sampler_spec.get("seed"),
                    validate=self.validate_batch_is_legal,
                )  # fmt: skip
                rounds.run(plan.start, returns)
        except JournalError as exc:  # another worker's write broke the journal mid-search: stop, say where
            log.error("the search stops: %s", exc)
            return returns
        summarise(plan.study, plan.space, self.journal, self.budget_s, sweep_dir)
        return returns
