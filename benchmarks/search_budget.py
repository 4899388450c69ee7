"""`python -m benchmarks.search_budget`: which sampler makes a search worth its budget, seeds x budgets.

The sweeper's own loop (kgbench.search.asking.ask_new: a repeated config reuses its result and costs nothing, a
finite space is sampled without repeats; the budget counts measured configs) with each sampler, on two spaces of the
simulated engine's throughput model (kgserve.sim.model.throughput.predict_throughput, a seeded 3% noise per level):

- ``cpu``: numAnalysisThreads 1,2,4 x numSearchThreadsPerAnalysisThread 1,2,4 on the CPU profile (cpu-eigen-b6c96,
  calibrated on the real KataGo Eigen build: docs/throughput-model.md), load=cpu's shape (one level of 8 queries in
  flight, 16 visits): the 9-config grid of issue 28;
- ``gpu``: benchmarks.search's 576-config space on the GPU profile (levels 16, 64, 256, 50 visits, the median
  pruner, levels highest first).

For every (sampler, budget) it reports over the seeds: the job-seconds spent against the grid's, and the fraction
of the grid's optimum (true, noise-free req/s) that the search's pick reaches, with how many seeds came within 5%.
Also ``tpe-10 (old)``: TPE with Optuna's 10 random start-up trials and a repeated config using up a trial, as the
sweeper did before issue 28. ``--starts katago none``: with and without the sweeper's start from KataGo's advice
(kgbench.search.start, enqueued as the first trial as the sweeper does); ``--budget-share F``: the budget in
job-seconds, F of the grid's (kgbench.search.budget's rule, the modelled job-seconds), ``n_trials`` the cap.

    python -m benchmarks.search_budget --space cpu --seeds 20
    python -m benchmarks.search_budget --space gpu --seeds 5 --budgets 15 30 60
    python -m benchmarks.search_budget --space cpu --seeds 20 --budgets 9 --budget-share 1/3 --starts katago none
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import optuna

from benchmarks.search import LEVEL_S, LEVELS, PRUNER, SPACE, STARTUP_S, VISITS, grid_configs
from kgbench.load.types import LevelSummary
from kgbench.search.asking import ask_new, enqueue_start, measured_trials, reuse_earlier
from kgbench.search.budget import jobs_that_fit, spent
from kgbench.search.space import SearchSpace, parse_space
from kgbench.search.start import start_params
from kgbench.search.study import JOB_S_ATTR, make_pruner, make_sampler, tell_job
from kgbench.search.trial import TrialLink
from kgserve.sim.model.throughput import predict_throughput

__all__ = ["SAMPLERS", "SPACES", "BudgetOutcome", "run_one", "summary_table"]

NOISE = 0.03
WITHIN = 0.05


@dataclass(frozen=True)
class Landscape:
    params: Mapping[str, str]
    fixed: Mapping[str, int]
    profile: str
    levels: tuple[int, ...]
    visits: int
    startup_s: float
    level_s: float
    prune: bool

    def space(self) -> SearchSpace:
        return parse_space([f"++{k}={v}" for k, v in self.params.items()])

    def level_values(self, values: Mapping[str, object]) -> list[float]:
        cfg = {**self.fixed, **{k: int(str(v)) for k, v in values.items()}}
        return [predict_throughput(cfg, self.visits, c, profile=self.profile) for c in self.levels]


SPACES = {
    # load=cpu: one level of 8, 16 visits; start-up ~5 s, warmup 2 s + 3 windows of 5 s
    "cpu": Landscape(
        {
            "numAnalysisThreads": "tag(ordered, choice(1, 2, 4))",
            "numSearchThreadsPerAnalysisThread": "tag(ordered, choice(1, 2, 4))",
        },
        {"nnMaxBatchSize": 128},
        "cpu-eigen-b6c96",
        (8,),
        16,
        5.0,
        17.0,
        False,
    ),
    "gpu": Landscape(SPACE, {}, "h200-b40c768", LEVELS, VISITS, STARTUP_S, LEVEL_S, True),
}
SAMPLERS: dict[str, dict[str, object]] = {
    "tpe-10 (old)": {"name": "tpe", "multivariate": True, "n_startup_trials": 10},
    "tpe-10": {"name": "tpe", "multivariate": True, "n_startup_trials": 10},
    "tpe-auto": {"name": "tpe", "multivariate": True, "n_startup_trials": "auto"},
    "random": {"name": "random"},
    "qmc": {"name": "qmc"},
}


@dataclass(frozen=True)
class BudgetOutcome:
    sampler: str
    start: str  # katago | none
    budget: int
    seed: int
    measured: int  # distinct configs measured
    spent_s: float
    grid_s: float
    reached: float  # true req/s of the pick / the grid's optimum


def _level(concurrency: int, rps: float) -> LevelSummary:
    return LevelSummary(concurrency, None, 0, LEVEL_S, rps, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, {}, 3, (rps,), True)


def run_one(
    land: Landscape, sampler: str, budget: int, seed: int, start: str = "none", budget_share: float | None = None
) -> BudgetOutcome:
    """One search: ``budget`` measured configs at most, ``start`` the sweeper's setting, ``budget_share`` (when set)
    the job-second budget as a share of the grid's."""
    space = land.space()
    truths = {}
    for cfg in grid_configs(space):
        truths[tuple(sorted(cfg.items()))] = max(land.level_values(cfg))
    optimum = max(truths.values())
    grid_s = sum(land.startup_s + (0 if v <= 0 else len(land.levels) * land.level_s) for v in truths.values())
    old = sampler.endswith("(old)")
    spec = SAMPLERS[sampler]
    chosen = (
        optuna.samplers.QMCSampler(seed=seed)  # measured for comparison only; the sweeper does not offer it
        if spec["name"] == "qmc"
        else make_sampler({**spec, "seed": seed}, budget)
    )
    study = optuna.create_study(
        sampler=chosen,
        pruner=make_pruner(PRUNER if land.prune else {"name": "none"}),
        direction="maximize",
    )
    rng, noise = random.Random(seed), random.Random(seed + 1000)
    if (first := start_params(space, start, land.fixed)) is not None:
        enqueue_start(study, first)
    budget_s = None if budget_share is None else budget_share * grid_s
    spent_s, asked = 0.0, 0
    while (len(study.trials) if old else measured_trials(study)) < budget and asked < 50 * budget:
        if jobs_that_fit(spent(study), budget_s, 1) == 0:
            break
        asked += 1
        if old:  # before issue 28: every trial counts, a repeat reuses a result and still uses up its trial
            trial = study.ask(space.distributions)
            if reuse_earlier(study, trial):
                continue
        else:
            found, _ = ask_new(study, space, rng)
            if found is None:
                break
            trial = found
        values = land.level_values(space.values(trial.params))
        if max(values) <= 0:
            spent_s += land.startup_s
            trial.set_user_attr(JOB_S_ATTR, land.startup_s)
            tell_job(study, trial, None, 0.0)
            continue
        link = TrialLink(trial)
        measured: list[float] = []
        for concurrency, value in reversed(list(zip(land.levels, values, strict=True))):
            measured.append(value * max(0.0, noise.gauss(1.0, NOISE)))
            if land.prune and link.on_level(_level(concurrency, measured[-1])):
                break
        spent_s += land.startup_s + len(measured) * land.level_s
        trial.set_user_attr(JOB_S_ATTR, land.startup_s + len(measured) * land.level_s)
        tell_job(study, trial, max(measured), 0.0)
    best = study.best_trial
    reached = max(land.level_values(space.values(best.params))) / optimum
    measured_configs = len(
        {tuple(sorted(t.params.items())) for t in study.trials if "kgbench.reused_from" not in t.user_attrs}
    )
    return BudgetOutcome(sampler, start, budget, seed, measured_configs, spent_s, grid_s, reached)


def summary_table(outcomes: Sequence[BudgetOutcome]) -> str:
    lines = [
        "| sampler | start | budget (trials) | configs measured (mean) | job-seconds, share of the grid (mean / most) "
        "| fraction of the optimum reached: mean / worst | seeds within 5% |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    keys = sorted({(o.sampler, o.start, o.budget) for o in outcomes},
                  key=lambda k: (k[2], list(SAMPLERS).index(k[0]), k[1]))  # fmt: skip
    for sampler, start, budget in keys:
        group = [o for o in outcomes if (o.sampler, o.start, o.budget) == (sampler, start, budget)]
        share = statistics.mean(o.spent_s / o.grid_s for o in group)
        most = max(o.spent_s / o.grid_s for o in group)
        reached = [o.reached for o in group]
        within = sum(r >= 1 - WITHIN for r in reached)
        lines.append(
            f"| {sampler} | {start} | {budget} | {statistics.mean(o.measured for o in group):.1f} "
            f"| {share:.1%} / {most:.1%} "
            f"| {statistics.mean(reached):.3f} / {min(reached):.3f} | {within} of {len(group)} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.search_budget", description=__doc__.split("\n\n")[0])
    p.add_argument("--space", choices=sorted(SPACES), default="cpu")
    p.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1")
    p.add_argument("--budgets", type=int, nargs="+", default=None, help="trials (default: cpu 2 3 4 5, gpu 15 30 60)")
    p.add_argument("--samplers", nargs="+", choices=list(SAMPLERS), default=list(SAMPLERS))
    p.add_argument("--starts", nargs="+", choices=["katago", "none"], default=["none"], help="hydra.sweeper.start")
    p.add_argument("--budget-share", type=lambda text: float(Fraction(text)), default=None,
                   help="hydra.sweeper.budget_s as a share of the grid's job-seconds, e.g. 1/3")  # fmt: skip
    args = p.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    land = SPACES[args.space]
    budgets = args.budgets or ([2, 3, 4, 5] if args.space == "cpu" else [15, 30, 60])
    outcomes = [run_one(land, s, b, seed, start, args.budget_share) for s in args.samplers for start in args.starts
                for b in budgets for seed in range(args.seeds)]  # fmt: skip
    size = len(grid_configs(land.space()))
    print(f"space {args.space}: {size} configs ({', '.join(f'{k} {v}' for k, v in land.params.items())}); profile "
          f"{land.profile}; levels {list(land.levels)}, {land.visits} visits; noise {NOISE:.0%}; "
          f"pruner {'median' if land.prune else 'none'}; seeds 0-{args.seeds - 1}"
          + (f"; budget_s {args.budget_share:.1%} of the grid's job-seconds" if args.budget_share else ""))  # fmt: skip
    print()
    print(summary_table(outcomes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
