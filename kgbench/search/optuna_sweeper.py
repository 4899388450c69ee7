"""A Hydra sweeper driven by Optuna (>= 4) through ask/tell, its study in a journal file.

    python -m kgbench -m backend=sim load=smoke hparams_search=optuna hydra.sweeper.n_trials=12

Each round the sweeper asks the study for ``n_jobs`` trials, turns their parameters into Hydra overrides, launches
them with the configured launcher and tells the study each job's return value (the job's req/s). Each job also gets
``++search.journal=... ++search.study=... ++search.trial=N``: it opens its own trial in the journal and reports an
intermediate value after every concurrency level (kgbench.search.trial), so the pruner can stop a poor config before
its last level; a job that was stopped that way is told as PRUNED.

The study is persistent (``journal``, ``study_name``): running the same command again, or on other nodes with the
journal on a shared filesystem, adds workers to the same study. ``n_trials`` is the study's total budget of measured
configs: a worker stops asking once the study holds that many trials that ran a job (from every worker), or once a
finite space has none left.

Three rules spend the budget where it helps: a config the study already measured (or pruned) is not run again, its
earlier result is told at once (``kgbench.reused_from``) and that trial costs nothing; on a finite space the next
proposal is then the nearest config not measured yet (kgbench.search.study.ask_new), so a small space is sampled
without repeats; a job that failed (its config did not start, e.g. out of device memory) is told ``failed_value``
(0.0: it serves nothing), so the sampler learns to avoid that region (null: told as FAIL, which the sampler ignores).
TPE's random start-up trials are sized to the budget (``n_startup_trials: auto``). The space is printed before any
job runs, each reused trial as it happens, and the reused trials again at the end.

The first trial is KataGo's own advice for throughput (``start: katago``, kgbench.search.start: the most analysis
threads, the fewest search threads per analysis thread, a batch that holds them all), enqueued on a study that has
not measured it yet; ``start: none`` leaves every trial to the sampler, a mapping is a start of the user's own.
``budget_s`` caps the study's job-seconds as ``n_trials`` caps its measured configs (kgbench.search.budget): the
sweeper stops asking once another job, as long as the longest so far, would pass it.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import optuna
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf
from optuna.study import StudyDirection
from optuna.trial import TrialState

from kgbench.search.budget import jobs_that_fit, spent
from kgbench.search.space import SearchSpace, parse_space
from kgbench.search.start import FACTORS, KATAGO, describe_start, shown, start_params
from kgbench.search.study import (
    JOB_S_ATTR,
    PRUNER_ATTR,
    REUSED_ATTR,
    SearchError,
    ask_new,
    enqueue_start,
    frozen_trial,
    make_pruner,
    make_sampler,
    measured_trials,
    open_storage,
    startup_trials,
    tell_job,
)
from kgbench.search.trial import trial_overrides

__all__ = ["OptunaSweeper", "describe_search", "rewrite_keys"]

log = logging.getLogger(__name__)


def rewrite_keys(params: Mapping[str, str], groups: set[str]) -> list[str]:
    """``params`` (key -> sweep expression) as override strings; plain top-level keys that are not config groups
    get ``++`` (like kgbench's command line), so a KataGo key no config sets can be searched too."""
    out = []
    for key, value in params.items():
        plain = "." not in key and "/" not in key and not key.startswith(("+", "~")) and key not in groups
        out.append(f"{'++' if plain else ''}{key}={value}")
    return out


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
    ) -> None:
        if direction not in ("maximize", "minimize"):
            raise SearchError(f"hydra.sweeper.direction={direction!r}: use maximize or minimize")
        if n_trials < 1 or n_jobs < 1:
            raise SearchError("hydra.sweeper.n_trials and hydra.sweeper.n_jobs must be >= 1")
        if not study_name or not journal:
            raise SearchError("hydra.sweeper.study_name and hydra.sweeper.journal must be set")
        if budget_s is not None and not (isinstance(budget_s, int | float) and budget_s > 0):
            raise SearchError(f"hydra.sweeper.budget_s={budget_s!r}: job-seconds > 0, or null (no budget)")
        self.study_name = study_name
        self.journal = str(Path(journal).expanduser().resolve())
        self.direction = direction
        self.n_trials = n_trials
        self.n_jobs = n_jobs
        self.sampler_spec = _plain(sampler)
        self.pruner_spec = _plain(pruner)
        self.params = {str(k): str(v) for k, v in (params or {}).items()}
        self.failed_value = failed_value
        self.start = _plain(start) if isinstance(start, Mapping) else start
        self.budget_s = None if budget_s is None else float(budget_s)
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.launcher: Launcher | None = None
        self.space: SearchSpace | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.config = config
        self.hydra_context = hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def _study(self) -> optuna.Study:
        study = optuna.create_study(
            study_name=self.study_name,
            storage=open_storage(self.journal),
            sampler=make_sampler(self.sampler_spec, self.n_trials),
            pruner=make_pruner(self.pruner_spec),
            direction=StudyDirection.MAXIMIZE if self.direction == "maximize" else StudyDirection.MINIMIZE,
            load_if_exists=True,
        )
        if study.direction.name.lower() != self.direction:
            raise SearchError(
                f"study {self.study_name!r} in {self.journal} exists with direction {study.direction.name.lower()}"
            )
        study.set_user_attr(PRUNER_ATTR, self.pruner_spec)
        return study

    def sweep(self, arguments: list[str]) -> list[Sequence[JobReturn]]:
        assert self.config is not None and self.launcher is not None and self.hydra_context is not None
        groups = {*self.hydra_context.config_loader.list_groups(""), "hydra"}  # conf/ folders: group names
        space = parse_space([*rewrite_keys(self.params, groups), *arguments])
        if not space.distributions:
            raise SearchError("nothing to search: give hydra.sweeper.params or sweep overrides like x=choice(1,2)")
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        known = {key: self.config.get(key) for key in FACTORS}  # the config's values, for keys not searched
        lines = describe_search(space, self.n_trials, self.sampler_spec, self.start, known, self.budget_s)
        study = self._study()
        self.space = space
        for line in lines:
            log.info("%s", line)
        log.info("Optuna study %r in %s", self.study_name, self.journal)
        if measured_trials(study) < self.n_trials:  # a study whose budget is spent enqueues nothing
            self._enqueue_start(study, start_params(space, self.start, known))
        returns: list[Sequence[JobReturn]] = []
        job_index = 0
        rng = random.Random(self.sampler_spec.get("seed"))
        while (left := self.n_trials - measured_trials(study)) > 0:
            if (fit := self._jobs_within_budget(study, min(self.n_jobs, left))) == 0:
                break
            trials = []
            for _ in range(fit):
                trial, reused = ask_new(study, space, rng)
                for number, earlier in reused:
                    log.info("trial %d repeats trial %d's config: its result reused, no job, no budget used",
                             number, earlier)  # fmt: skip
                if trial is not None:
                    trials.append(trial)
            if not trials:
                if space.size is not None:
                    log.info("every config of the space is measured (%s configs): the search stops", space.size)
                else:  # a continuous space: the sampler kept proposing measured configs
                    log.info("the sampler proposed only configs already measured: the search stops")
                break
            batch = [self._job_overrides(space, trial) for trial in trials]
            self.validate_batch_is_legal(batch)
            launched = time.monotonic()
            results = self.launcher.launch(batch, initial_job_idx=job_index)
            batch_s = time.monotonic() - launched
            job_index += len(batch)
            for trial, result in zip(trials, results, strict=True):
                self._tell(study, trial, result, batch_s)
            returns.append(results)
        self._summarise(study, sweep_dir)
        return returns

    def _job_overrides(self, space: SearchSpace, trial: optuna.Trial) -> list[str]:
        return [*space.overrides(trial.params), *trial_overrides(self.journal, self.study_name, trial.number)]

    def _enqueue_start(self, study: optuna.Study, params: dict[str, object] | None) -> None:
        if params is None or self.space is None:
            return
        start = shown(self.space, params)
        if (earlier := enqueue_start(study, params)) is not None:
            log.info("start %s: trial %d has it already (measured, running or enqueued), not enqueued", start, earlier)
        else:
            log.info("start %s: enqueued as the next trial", start)

    def _jobs_within_budget(self, study: optuna.Study, wanted: int) -> int:
        """How many jobs the job-second budget allows this round (``wanted`` without one); 0 logs why it stops."""
        so_far = spent(study)
        fit = jobs_that_fit(so_far, self.budget_s, wanted)
        if fit == 0:
            log.info("job-seconds: %.0f spent by %d job(s), the longest %.0f s; another would pass "
                     "hydra.sweeper.budget_s=%g: the search stops", so_far.seconds, so_far.jobs,
                     so_far.longest_s, self.budget_s)  # fmt: skip
        return fit

    def _tell(self, study: optuna.Study, trial: optuna.Trial, result: JobReturn, batch_s: float) -> None:
        if JOB_S_ATTR not in frozen_trial(study, trial.number).user_attrs:
            # the job could not write its seconds (killed, journal not writable): the batch's, an upper bound
            trial.set_user_attr(JOB_S_ATTR, round(batch_s, 3))
        value = result.return_value if result.status == JobStatus.COMPLETED else None
        number = float(value) if isinstance(value, int | float) else None
        tell_job(study, trial, number, self.failed_value)

    def _summarise(self, study: optuna.Study, sweep_dir: Path) -> None:
        trials = study.get_trials(deepcopy=False)
        reused = {t.number: int(t.user_attrs[REUSED_ATTR]) for t in trials if REUSED_ATTR in t.user_attrs}
        states = [t.state for t in trials if t.number not in reused]
        counts = {s.name.lower(): states.count(s) for s in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)}
        counts["reused"] = len(reused)
        so_far = spent(study)
        results: dict[str, Any] = {"study_name": self.study_name, "journal": self.journal, "trials": counts,
                                   "reused_from": reused, "job_seconds": round(so_far.seconds, 1),
                                   "budget_s": self.budget_s}  # fmt: skip
        seconds = f"{so_far.seconds:.1f} job-seconds" + (f" of {self.budget_s:g}" if self.budget_s else "")
        if reused:
            shown = ", ".join(f"{number} (of {earlier})" for number, earlier in sorted(reused.items()))
            log.info("reused a measured result, no job: trials %s", shown)
        try:
            best = study.best_trial
        except ValueError:  # no completed trial
            log.warning("Optuna study %r: no trial completed (%s; %s)", self.study_name, counts, seconds)
        else:
            params = self.space.values(best.params) if self.space is not None else best.params
            results.update(best_value=best.value, best_params=params, best_trial=best.number)
            log.info("Best trial %d: %s -> %.4g (%s; %s)", best.number, params, best.value, counts, seconds)
        OmegaConf.save(OmegaConf.create(results), sweep_dir / "optimization_results.yaml")


def describe_search(
    space: SearchSpace,
    n_trials: int,
    sampler: Mapping[str, Any],
    start: object = KATAGO,
    known: Mapping[str, object] | None = None,
    budget_s: float | None = None,
) -> list[str]:
    """The search before any job runs: the space, the budget, the start and the sampler (what `python -m kgbench
    --space` and the sweeper print). Raises SearchError for a start that is not in the space."""
    size = space.size
    share = f" ({min(n_trials, size) / size:.0%} of the space)" if size else ""
    seconds = (f"budget: hydra.sweeper.budget_s={budget_s:g} job-seconds (the search stops asking once another job, "
               "as long as the longest so far, would pass it)") if budget_s else None  # fmt: skip
    name = str(sampler.get("name", "tpe"))
    startup = sampler.get("n_startup_trials", "auto")
    if name == "tpe" and str(startup) == "auto":
        startup = startup_trials(n_trials)
    how = f"tpe, {startup} random start-up trial(s)" if name == "tpe" else name
    return [
        f"search space ({len(space.distributions)} parameter(s)):",
        *space.describe(),
        f"budget: hydra.sweeper.n_trials={n_trials} measured configs{share}; a repeated config reuses its result and "
        "costs nothing" + ("; a finite space is sampled without repeats" if size else ""),
        *([seconds] if seconds else []),
        describe_start(space, start_params(space, start, known), start),
        f"sampler: {how}",
        "narrow it: ~hydra.sweeper.params.KEY drops a key (it keeps the config's value); "
        "hydra.sweeper.params.KEY='tag(ordered, choice(2, 4))' searches fewer values; KEY=VALUE fixes it",
    ]


def _plain(node: Mapping[str, Any] | None) -> dict[str, Any]:
    if node is None:
        return {}
    if isinstance(node, DictConfig):
        container = OmegaConf.to_container(node, resolve=True)
        return {str(k): v for k, v in container.items()} if isinstance(container, dict) else {}
    return dict(node)
