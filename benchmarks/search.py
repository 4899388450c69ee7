"""`python -m benchmarks.search`: does the Optuna search find the grid's optimum for a fraction of its cost?

The objective is the simulated engine's throughput model (kgserve.sim.model.throughput.predict_throughput), not a real
sim sweep: a grid of hundreds of jobs per seed is too slow to run here, and the model is what the timed simulator
follows (within ~15%). Each job is modelled as a kgbench load job on the fixed ladder of ``LEVELS``: an engine
start-up of ``STARTUP_S``, then per level ``LEVEL_S`` (warmup + windows); the measured req/s of a level is the
model's value times a seeded noise factor (``NOISE`` relative sd), and a config that does not fit the device's
memory fails after its start-up. The grid measures every config fully; the search runs the project's own Optuna
machinery (journal storage, the sampler and pruner factories, the trial link that reports every level and is
pruned) until it has spent ``--budget`` of the grid's job-seconds. The verdict compares the true (noise-free)
throughput of the search's best trial with the grid's true optimum.

    python -m benchmarks.search --seeds 0 1 2 --budget 0.25
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from kgbench.load.types import LevelSummary
from kgbench.search.asking import reuse_earlier
from kgbench.search.space import SearchSpace, parse_space
from kgbench.search.study import (
    FAILED_ATTR,
    PRUNER_ATTR,
    REUSED_ATTR,
    make_pruner,
    make_sampler,
    open_storage,
    open_study,
    tell_job,
    trial_by_number,
)
from kgbench.search.trial import TrialLink
from kgserve.sim.model.throughput import predict_throughput

__all__ = ["SPACE", "SearchOutcome", "grid_configs", "main", "run_search", "true_value"]

SPACE = {
    "nnMaxBatchSize": "tag(ordered, choice(16, 32, 64, 128, 256, 512))",
    "numAnalysisThreads": "tag(ordered, choice(8, 16, 32, 64, 128, 256))",
    "numSearchThreadsPerAnalysisThread": "tag(ordered, choice(1, 2, 4, 8))",
    "numNNServerThreadsPerModel": "tag(ordered, choice(1, 2, 3, 4))",
}
LEVELS = (16, 64, 256)  # load.concurrency of every job
VISITS = 50  # load.max_visits
STARTUP_S = 30.0  # engine start-up (a TensorRT build would cost more)
LEVEL_S = 20.0  # per level: warmup 5 s + 3 windows of 5 s
NOISE = 0.03  # relative sd of a level's measured req/s (run-to-run noise)
PRUNER = {"name": "median", "n_startup_trials": 8, "n_warmup_steps": 0}
FAILED_VALUE = 0.0  # the sweeper's default failed_value
SAMPLER = {"name": "tpe", "multivariate": True, "n_startup_trials": 10}


def space(ordered: bool = True) -> SearchSpace:
    """The search space of SPACE; ``ordered=False`` drops the ``ordered`` tags (plain categorical choices)."""

    def text(value: str) -> str:
        return value if ordered else value.removeprefix("tag(ordered, ").removesuffix(")")

    return parse_space([f"++{key}={text(value)}" for key, value in SPACE.items()])


def grid_configs(search: SearchSpace) -> list[dict[str, object]]:
    """Every config of the space (its choices, ordered or not): what a grid sweep would run."""
    names = list(search.distributions)
    choices: list[tuple[object, ...]] = []
    for name in names:
        dist = search.distributions[name]
        if name in search.ordered:
            choices.append(search.ordered[name])
        else:
            assert isinstance(dist, CategoricalDistribution)
            choices.append(tuple(dist.choices))
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*choices)]


def level_values(cfg: Mapping[str, object]) -> list[float]:
    keys = {k: int(str(v)) for k, v in cfg.items()}
    return [predict_throughput(keys, VISITS, c) for c in LEVELS]


def true_value(cfg: Mapping[str, object]) -> float:
    """The job's noise-free headline: its best level's req/s."""
    return max(level_values(cfg))


def job_seconds(levels_run: int, failed: bool) -> float:
    return STARTUP_S + (0 if failed else levels_run * LEVEL_S)


def _level(concurrency: int, rps: float) -> LevelSummary:
    return LevelSummary(concurrency, None, 0, LEVEL_S, rps, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, {}, 3, (rps,), True)


@dataclass(frozen=True)
class SearchOutcome:
    seed: int
    trials: int
    complete: int
    pruned: int
    failed: int
    reused: int
    spent_s: float
    grid_s: float
    found_s: float  # job-seconds spent when the finally best trial had been measured
    best_true: float
    optimum: float

    @property
    def spent_share(self) -> float:
        return self.spent_s / self.grid_s

    @property
    def gap(self) -> float:
        """How far below the optimum the search's choice is (0.03 = 3% lower)."""
        return 1.0 - self.best_true / self.optimum

    def passes(self, budget: float, within: float) -> bool:
        return self.gap <= within and self.spent_share <= budget


def run_search(
    seed: int,
    budget: float,
    journal_dir: Path,
    pruner: Mapping[str, object] | None = None,
    sampler: Mapping[str, object] | None = None,
    ordered: bool = True,
    descending: bool = True,
) -> SearchOutcome:
    """One search on a fresh journal study, until ``budget`` x the grid's job-seconds are spent."""
    search = space(ordered)
    grid = grid_configs(search)
    truths = [true_value(cfg) for cfg in grid]
    grid_s = sum(job_seconds(len(LEVELS), failed=value <= 0) for value in truths)  # every config, every level
    optimum = max(truths)
    rng = random.Random(seed)
    journal = journal_dir / f"search-{seed}.journal"
    pruner_spec = dict(pruner if pruner is not None else PRUNER)
    study = optuna.create_study(
        study_name="bench", storage=open_storage(journal), sampler=make_sampler({**(sampler or SAMPLER), "seed": seed}),
        pruner=make_pruner(pruner_spec), direction="maximize",
    )  # fmt: skip
    study.set_user_attr(PRUNER_ATTR, pruner_spec)
    job_view = open_study(journal, "bench")  # the job's own handle, as a job process would open it
    spent = 0.0
    spent_after: dict[int, float] = {}  # trial number -> job-seconds spent once its job finished
    while spent + job_seconds(len(LEVELS), failed=False) <= budget * grid_s:
        trial = study.ask(search.distributions)
        if reuse_earlier(study, trial):  # measured before: no job runs (the sweeper's rule)
            continue
        values = level_values(search.values(trial.params))
        if max(values) <= 0:  # does not fit the device: fails at start-up, serves nothing
            spent += job_seconds(0, failed=True)
            tell_job(study, trial, None, FAILED_VALUE)
            continue
        link = TrialLink(trial_by_number(job_view, trial.number))
        measured: list[float] = []
        order = list(zip(LEVELS, values, strict=True))
        for concurrency, value in reversed(order) if descending else order:
            measured.append(value * max(0.0, rng.gauss(1.0, NOISE)))
            if link.on_level(_level(concurrency, measured[-1])):
                break
        spent += job_seconds(len(measured), failed=False)
        spent_after[trial.number] = spent
        tell_job(study, trial, max(measured), FAILED_VALUE)
    trials = study.trials
    reused = sum(REUSED_ATTR in t.user_attrs for t in trials)
    pruned = sum(t.state == TrialState.PRUNED and REUSED_ATTR not in t.user_attrs for t in trials)
    failed = sum(FAILED_ATTR in t.user_attrs for t in trials)
    best = study.best_trial
    first = int(str(best.user_attrs.get(REUSED_ATTR, best.number)))
    best_true = true_value(search.values(best.params))
    return SearchOutcome(
        seed, len(trials), len(trials) - reused - pruned - failed, pruned, failed, reused, spent, grid_s,
        spent_after.get(first, spent), best_true, optimum,
    )  # fmt: skip


def table(outcomes: Sequence[SearchOutcome], budget: float, within: float) -> str:
    lines = [
        "| seed | trials: ran to the end / pruned / failed / reused | job-seconds (share of grid) "
        "| best found after | best found (true req/s) | grid optimum | gap | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        verdict = "pass" if o.passes(budget, within) else "FAIL"
        lines.append(
            f"| {o.seed} | {o.trials}: {o.complete} / {o.pruned} / {o.failed} / {o.reused} "
            f"| {o.spent_s:.0f} of {o.grid_s:.0f} ({o.spent_share:.1%}) | {o.found_s / o.grid_s:.1%} of the grid "
            f"| {o.best_true:.2f} | {o.optimum:.2f} | {o.gap:.1%} | {verdict} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.search", description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--budget", type=float, default=0.25, help="share of the grid's job-seconds the search may spend")
    p.add_argument("--within", type=float, default=0.05, help="largest accepted gap to the grid optimum")
    p.add_argument("--no-prune", action="store_true", help="search without the pruner (for comparison)")
    p.add_argument("--unordered", action="store_true", help="plain categorical choices (for comparison)")
    p.add_argument("--ascending", action="store_true", help="levels lowest first (for comparison)")
    args = p.parse_args(argv)
    if not 0 < args.budget <= 1 or not 0 <= args.within < 1:
        print("error: --budget must be in (0, 1] and --within in [0, 1)", file=sys.stderr)
        return 2
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pruner = {"name": "none"} if args.no_prune else None
    with tempfile.TemporaryDirectory(prefix="kgbench-search-") as tmp:
        outcomes = [
            run_search(seed, args.budget, Path(tmp), pruner, None, not args.unordered, not args.ascending)
            for seed in args.seeds
        ]
    grid = len(grid_configs(space()))
    print(
        f"search space: {grid} configs ({', '.join(f'{k} {v}' for k, v in SPACE.items())}); "
        f"levels {list(LEVELS)}, {VISITS} visits, start-up {STARTUP_S:g} s, {LEVEL_S:g} s per level, "
        f"noise {NOISE:.0%}; sampler {SAMPLER}; pruner {'none' if args.no_prune else PRUNER}"
        f"{'; unordered choices' if args.unordered else ''}; levels {'lowest' if args.ascending else 'highest'} first\n"
    )
    print(table(outcomes, args.budget, args.within))
    ok = all(o.passes(args.budget, args.within) for o in outcomes)
    print(f"\n{sum(o.passes(args.budget, args.within) for o in outcomes)} of {len(outcomes)} seeds within "
          f"{args.within:.0%} of the optimum for <= {args.budget:.0%} of the grid's job-seconds")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
