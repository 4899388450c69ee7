"""kgbench's Optuna sweeper: the search space, the study helpers, a job's trial link (journal file in tmp_path).
The real search on the simulated engine is in tests/kgbench/search/test_optuna_sweep_sim.py."""

from __future__ import annotations

import random
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from kgbench.__main__ import main
from kgbench.load.types import LevelSummary
from kgbench.search.asking import ask_new, measured_trials, reuse_earlier
from kgbench.search.optuna_sweeper import rewrite_keys
from kgbench.search.space import parse_space
from kgbench.search.study import (
    FAILED_ATTR,
    PRUNED_ATTR,
    REUSED_ATTR,
    SearchError,
    make_pruner,
    make_sampler,
    open_storage,
    open_study,
    startup_trials,
    tell_job,
    trial_by_number,
    trial_key,
)
from kgbench.search.trial import TrialLink, trial_overrides
from tests.helpers.kgbench_runs import CPU_SEARCH


def test_space_from_sweep_overrides() -> None:
    space = parse_space(
        ["++nnMaxBatchSize=choice(32,64)", "++numNNServerThreadsPerModel=range(1,4)",
         "load.warmup_s=tag(log,interval(0.1,1.0))", "backend=sim", "load=smoke"]
    )  # fmt: skip
    assert space.distributions == {
        "nnMaxBatchSize": CategoricalDistribution((32, 64)),
        "numNNServerThreadsPerModel": IntDistribution(1, 3),
        "load.warmup_s": FloatDistribution(0.1, 1.0, log=True),
    }
    assert space.fixed == ["backend=sim", "load=smoke"]
    assert space.overrides({"nnMaxBatchSize": 64, "numNNServerThreadsPerModel": 2}) == [
        "backend=sim", "load=smoke", "++nnMaxBatchSize=64", "++numNNServerThreadsPerModel=2",
    ]  # fmt: skip
    assert parse_space(["x=range(0,10,5)"]).distributions["x"] == IntDistribution(0, 5, step=5)
    with pytest.raises(SearchError, match="cannot parse"):
        parse_space(["x=choice(1,"])


def test_rewrite_keys_adds_force_add_to_plain_keys_only() -> None:
    params = {"nnMaxBatchSize": "choice(8,16)", "backend": "choice(cuda,trt)", "load.max_visits": "choice(5,50)"}
    assert rewrite_keys(params, {"backend", "load"}) == [
        "++nnMaxBatchSize=choice(8,16)", "backend=choice(cuda,trt)", "load.max_visits=choice(5,50)",
    ]  # fmt: skip


def test_sampler_and_pruner_factories() -> None:
    assert isinstance(make_sampler(None), optuna.samplers.TPESampler)
    assert isinstance(make_sampler({"name": "random", "seed": 1}), optuna.samplers.RandomSampler)
    assert isinstance(make_pruner({"name": "median", "n_startup_trials": 2}), optuna.pruners.MedianPruner)
    assert isinstance(make_pruner({"name": "none"}), optuna.pruners.NopPruner)
    with pytest.raises(SearchError, match=r"pruner\.name"):
        make_pruner({"name": "oracle"})
    with pytest.raises(SearchError, match="pruner"):
        make_pruner({"name": "median", "bogus": 1})
    with pytest.raises(SearchError, match=r"sampler\.name"):
        make_sampler({"name": "cmaes"})
    with pytest.raises(SearchError, match="quotes"):
        trial_overrides("/tmp/it's.journal", "s", 0)


def level(c: int, rps: float) -> LevelSummary:
    return LevelSummary(c, None, 1, 1.0, rps, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0, 0, {}, 3, (rps,), True)


def test_trial_link_reports_best_so_far_and_prunes(tmp_path: Path) -> None:
    journal = tmp_path / "j.log"
    study = optuna.create_study(study_name="s", storage=open_storage(journal), direction="maximize")
    study.set_user_attr("kgbench.pruner", {"name": "median", "n_startup_trials": 1})
    for value in (100.0, 120.0):  # two completed trials with high values at step 0 and 1
        trial = study.ask()
        trial.report(value, 0)
        trial.report(value, 1)
        study.tell(trial, value)
    poor = study.ask()
    # the job's side: a separate process would do exactly this, from the overrides the sweeper gave it
    link = TrialLink(trial_by_number(open_study(journal, "s"), poor.number))
    assert link.on_level(level(4, 10.0)) is True  # far below the median at step 0: pruned
    assert link.pruned_at == 0
    frozen = open_study(journal, "s").trials[poor.number]
    assert frozen.intermediate_values == {0: 10.0} and frozen.user_attrs[PRUNED_ATTR] == 0
    good = study.ask()
    link = TrialLink(trial_by_number(open_study(journal, "s"), good.number))
    assert link.on_level(level(4, 150.0)) is False and link.on_level(level(8, 140.0)) is False
    assert open_study(journal, "s").trials[good.number].intermediate_values == {0: 150.0, 1: 150.0}  # best so far
    with pytest.raises(SearchError, match="no Optuna study"):
        open_study(journal, "missing")


def test_ordered_choice_samples_the_index_and_runs_the_value() -> None:
    space = parse_space(["++nnMaxBatchSize=tag(ordered, choice(16, 32, 64))", "backend=sim"])
    assert space.distributions == {"nnMaxBatchSize": IntDistribution(0, 2)}
    assert space.values({"nnMaxBatchSize": 2}) == {"nnMaxBatchSize": 64}
    assert space.overrides({"nnMaxBatchSize": 1}) == ["backend=sim", "++nnMaxBatchSize=32"]


def test_same_params_reuse_the_earlier_result_and_failures_count_as_the_failed_value(tmp_path: Path) -> None:
    study = optuna.create_study(study_name="s", storage=open_storage(tmp_path / "j.log"), direction="maximize")
    dist = {"x": CategoricalDistribution((1, 2))}
    first = study.ask(dist)
    assert reuse_earlier(study, first) is False
    assert tell_job(study, first, 7.5, 0.0) == TrialState.COMPLETE
    study.enqueue_trial({"x": first.params["x"]})
    fixed = study.ask(dist)
    assert reuse_earlier(study, fixed) is True  # no job: told the earlier value
    frozen = study.trials[fixed.number]
    assert frozen.value == 7.5 and frozen.user_attrs[REUSED_ATTR] == first.number
    other = 2 if first.params["x"] == 1 else 1
    study.enqueue_trial({"x": other})
    failed = study.ask(dist)
    assert tell_job(study, failed, None, 0.0) == TrialState.COMPLETE
    assert study.trials[failed.number].value == 0.0 and study.trials[failed.number].user_attrs[FAILED_ATTR]
    study.enqueue_trial({"x": other})
    ignored = study.ask(dist)
    # a job that marked its trial pruned is told PRUNED whatever it returned; no failed value: FAIL
    ignored.set_user_attr(PRUNED_ATTR, 0)
    assert tell_job(study, ignored, 3.0, 0.0) == TrialState.PRUNED
    study.enqueue_trial({"x": other})
    plain_fail = study.ask(dist)
    assert tell_job(study, plain_fail, float("nan"), None) == TrialState.FAIL


def test_search_benchmark_runs_within_its_budget(tmp_path: Path) -> None:
    from benchmarks.search import run_search, table

    outcome = run_search(0, 0.02, tmp_path)
    assert outcome.spent_s <= 0.02 * outcome.grid_s and outcome.found_s <= outcome.spent_s
    assert outcome.trials == outcome.complete + outcome.pruned + outcome.failed + outcome.reused
    assert 0 < outcome.best_true <= outcome.optimum
    assert "| 0 |" in table([outcome], 0.02, 0.05)


SMALL = ["++a=tag(ordered, choice(1, 2, 4))", "++b=tag(ordered, choice(1, 2, 4))", "backend=sim"]


def test_a_finite_space_knows_its_size_and_the_nearest_config_not_measured() -> None:
    space = parse_space(SMALL)
    assert space.size == 9 and len(list(space.configs())) == 9
    assert parse_space(["x=interval(0, 1)"]).size is None
    measured = {trial_key({"a": 1, "b": 1})}
    # next to the centre's index (1, 1): one step away on either key, a tie the rng breaks
    nearest = space.nearest_unmeasured({"a": 1, "b": 1}, measured, random.Random(0))
    assert nearest in ({"a": 0, "b": 1}, {"a": 2, "b": 1}, {"a": 1, "b": 0}, {"a": 1, "b": 2})
    every = {trial_key(c) for c in space.configs()}
    assert space.nearest_unmeasured({"a": 0, "b": 0}, every, random.Random(0)) is None
    assert parse_space([*SMALL, "++a=2"]).distributions.keys() == {"b"}  # fixed on the command line: out
    assert "++a=2" in parse_space([*SMALL, "++a=2"]).fixed


@pytest.mark.parametrize("budget", [3, 5, 9, 12])
def test_a_small_space_search_measures_as_many_distinct_configs_as_its_budget_allows(budget: int) -> None:
    """The sweeper's loop: repeats cost nothing and are moved to a config not measured yet, so a budget of n
    measures n distinct configs (all 9 when it is larger), whatever the sampler proposes."""
    space = parse_space(SMALL)
    for seed in range(5):
        study = optuna.create_study(direction="maximize", sampler=make_sampler({"seed": seed}, budget))
        rng = random.Random(seed)
        measured = []
        while measured_trials(study) < budget:
            trial, _ = ask_new(study, space, rng)
            if trial is None:
                break
            values = space.values(trial.params)
            measured.append(trial_key(trial.params))
            study.tell(trial, float(values["a"]) * 10 + float(values["b"]))  # a smooth landscape: repeats come
        assert len(measured) == len(set(measured)) == min(budget, 9), seed
        reused = [t for t in study.trials if REUSED_ATTR in t.user_attrs]
        assert len(study.trials) == len(measured) + len(reused)


def test_tpe_start_up_trials_are_sized_to_the_budget() -> None:
    assert [startup_trials(n) for n in (1, 3, 5, 12, 30, 60, 200)] == [1, 1, 1, 3, 8, 10, 10]
    sampler = make_sampler({"name": "tpe", "seed": 0}, 12)
    assert isinstance(sampler, optuna.samplers.TPESampler) and sampler._n_startup_trials == 3
    assert make_sampler({"name": "tpe", "n_startup_trials": 5}, 12)._n_startup_trials == 5  # type: ignore[attr-defined]


def test_the_space_is_printed_before_any_job_runs(capsys: pytest.CaptureFixture[str]) -> None:
    args = [*CPU_SEARCH, "hydra.sweeper.n_trials=3"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "numAnalysisThreads                 ordered choice  1, 2, 4" in out
    assert "numSearchThreadsPerAnalysisThread  ordered choice  1, 2, 4" in out
    assert "  9 configs" in out and "n_trials=3 measured configs (33% of the space)" in out
    assert "sampler: tpe, 1 random start-up trial(s)" in out and "~hydra.sweeper.params.KEY" in out
    assert main(["--space", "-m", "backend=sim"]) == 2  # a grid: not a search
