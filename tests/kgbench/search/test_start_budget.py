"""A search's start (KataGo's throughput advice, the user's own, none) and its budget in job-seconds: the pure rules,
the study helpers, and what `python -m kgbench --space` prints. The real sweep on the sim is in
tests/kgbench/search/test_optuna_sweep_sim.py."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from omegaconf import OmegaConf
from optuna.trial import TrialState

from kgbench.__main__ import main
from kgbench.search.asking import enqueue_start, measured_trials
from kgbench.search.budget import Spent, jobs_that_fit, spent
from kgbench.search.space import SearchError, parse_space
from kgbench.search.start import describe_start, start_params
from kgbench.search.study import JOB_S_ATTR, REUSED_ATTR, open_storage
from kgbench.search.trial import record_job_end
from tests.helpers.kgbench_runs import CPU_SEARCH

GPU = [
    "++nnMaxBatchSize=tag(ordered, choice(16, 32, 64, 128, 256, 512))",
    "++numAnalysisThreads=tag(ordered, choice(8, 16, 32, 64, 128, 256))",
    "++numSearchThreadsPerAnalysisThread=tag(ordered, choice(1, 2, 4, 8))",
    "++numNNServerThreadsPerModel=tag(ordered, choice(1, 2, 3, 4))",
]


def test_katagos_advice_most_analysis_threads_fewest_search_threads_a_batch_that_holds_them() -> None:
    space = parse_space(GPU)
    params = start_params(space, "katago")
    assert params is not None and space.values(params) == {
        "numAnalysisThreads": 256, "numSearchThreadsPerAnalysisThread": 1, "nnMaxBatchSize": 256,
    }  # fmt: skip
    assert params == {"numAnalysisThreads": 5, "numSearchThreadsPerAnalysisThread": 0, "nnMaxBatchSize": 4}  # indices
    # no batch size holds the product: the largest; numSearchThreads is KataGo's older alias
    small = parse_space(["++nnMaxBatchSize=choice(8, 16)", "++numAnalysisThreads=range(1, 33)",
                         "++numSearchThreads=tag(ordered, choice(2, 4))"])  # fmt: skip
    assert start_params(small, "katago") == {"numAnalysisThreads": 32, "numSearchThreads": 0, "nnMaxBatchSize": 16}
    # a factor not searched: its value from the config, or from the space's fixed overrides
    batch_only = parse_space(["++nnMaxBatchSize=tag(ordered, choice(4, 8, 16))"])
    assert start_params(batch_only, "katago", {"numAnalysisThreads": 4, "numSearchThreadsPerAnalysisThread": 2}) == {
        "nnMaxBatchSize": 1
    }
    fixed = parse_space(["++nnMaxBatchSize=tag(ordered, choice(4, 8, 16))", "++numAnalysisThreads=16"])
    assert start_params(fixed, "katago", {"numAnalysisThreads": 4, "numSearchThreadsPerAnalysisThread": 1}) == {
        "nnMaxBatchSize": 2
    }
    assert start_params(batch_only, "katago") is None  # the product is unknown: no start


def test_no_start_without_the_advices_keys_or_with_none() -> None:
    other = parse_space(["load.max_visits=choice(5, 400)", "++numNNServerThreadsPerModel=range(1, 4)"])
    assert start_params(other, "katago") is None
    assert "speaks of none of the searched keys" in describe_start(other, None, "katago")
    space = parse_space(GPU)
    assert start_params(space, "none") is None and start_params(space, None) is None
    assert describe_start(space, None, "none") == "start: none: the sampler proposes every trial"
    with pytest.raises(SearchError, match=r"hydra\.sweeper\.start='best'"):
        start_params(space, "best")


def test_a_start_of_the_users_own_is_in_values_and_must_lie_in_the_space() -> None:
    space = parse_space([*GPU, "++load.max_visits=choice(5, 50)", "++x=interval(0.5, 2.0)"])
    params = start_params(space, {"numAnalysisThreads": 64, "load.max_visits": 50, "x": 1})
    assert params == {"numAnalysisThreads": 3, "load.max_visits": 50, "x": 1.0}
    line = describe_start(space, params, {"numAnalysisThreads": 64})
    assert line.startswith("start: numAnalysisThreads=64 load.max_visits=50 x=1.0: the first trial, from "
                           "hydra.sweeper.start; the sampler picks the other keys")  # fmt: skip
    with pytest.raises(SearchError, match=r"start\.numAnalysisThreads=65: not a value"):
        start_params(space, {"numAnalysisThreads": 65})
    with pytest.raises(SearchError, match=r"start\.nnMaxBatch: not a searched key"):
        start_params(space, {"nnMaxBatch": 64})
    assert start_params(space, {}) is None


def test_the_start_is_enqueued_once_and_the_sampler_draws_the_other_keys(tmp_path: Path) -> None:
    space = parse_space(GPU)
    study = optuna.create_study(storage=open_storage(tmp_path / "j.log"), direction="maximize",
                                sampler=optuna.samplers.RandomSampler(seed=0))  # fmt: skip
    params = start_params(space, "katago")
    assert params is not None
    assert enqueue_start(study, params) is None
    assert measured_trials(study) == 0  # enqueued, not asked: nothing measured yet
    assert enqueue_start(study, params) == 0  # enqueued already (a run whose budget was spent, another worker)
    first = study.ask(space.distributions)
    assert {k: first.params[k] for k in params} == params and "numNNServerThreadsPerModel" in first.params
    study.tell(first, 10.0)
    # a study that measured it (continued, or another worker's) does not enqueue it again
    assert enqueue_start(study, params) == first.number
    assert not study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    # a reused trial with the same params does not count as the measurement
    study.enqueue_trial(dict(first.params))
    twin = study.ask(space.distributions)
    twin.set_user_attr(REUSED_ATTR, first.number)
    study.tell(twin, 10.0)
    assert enqueue_start(study, params) == first.number


def test_the_job_second_budget_counts_every_workers_jobs_and_stops_before_passing(tmp_path: Path) -> None:
    assert jobs_that_fit(Spent(0.0, 0, 0), 1.0, 2) == 2  # nothing known yet: the first round runs
    assert jobs_that_fit(Spent(38.0, 2, 0, 19.0), None, 3) == 3  # no budget
    assert jobs_that_fit(Spent(38.0, 2, 0, 19.0), 57.4, 3) == 1  # 38 + 19 <= 57.4
    assert jobs_that_fit(Spent(38.0, 2, 0, 19.0), 56.9, 3) == 0  # another 19 would pass it
    # jobs of 18.7 + 19.5 s, a budget of 57.35 s: at the mean (19.1) a third would fit and could end past it (a
    # third job as long as the second); at the longest (19.5) it does not start
    assert jobs_that_fit(Spent(38.2, 2, 0, 19.5), 57.35, 3) == 0
    assert jobs_that_fit(Spent(38.0, 2, 1, 19.0), 76.0, 3) == 1  # a job running elsewhere counts at the longest
    study = optuna.create_study(storage=open_storage(tmp_path / "j.log"), study_name="s", direction="maximize")
    dist = {"x": optuna.distributions.CategoricalDistribution((1, 2, 3))}
    done = study.ask(dist)
    cfg = OmegaConf.create({"search": {"journal": str(tmp_path / "j.log"), "study": "s", "trial": done.number}})
    record_job_end(cfg, 20.5, lambda: "node7", None)  # the job's side, as a job in another process writes it
    record_job_end(OmegaConf.create({"search": {"trial": None}}), 99.0, lambda: "x", None)  # not a search's job
    study.tell(done, 5.0)
    study.ask(dist)  # another worker's job, running
    reused = study.ask(dist)
    reused.set_user_attr(REUSED_ATTR, done.number)
    reused.set_user_attr(JOB_S_ATTR, 99.0)
    study.tell(reused, 5.0)
    assert spent(study) == Spent(20.5, 1, 1, 20.5)
    assert study.trials[done.number].user_attrs["kgbench.machine"] == "node7"
    record_job_end(cfg, 1.0, lambda: "node7", "a reason")  # a finished trial cannot be written: a warning, no exception
    assert spent(study).seconds == 20.5


def test_the_space_shows_the_start_and_the_job_second_budget(capsys: pytest.CaptureFixture[str]) -> None:
    args = [*CPU_SEARCH, "hydra.sweeper.n_trials=9", "hydra.sweeper.budget_s=57"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "budget: hydra.sweeper.budget_s=57 job-seconds" in out
    assert "start: numAnalysisThreads=4 numSearchThreadsPerAnalysisThread=1: the first trial, from KataGo's " in out
    assert main([*args, "hydra.sweeper.start={numAnalysisThreads:2}"]) == 0
    assert "start: numAnalysisThreads=2: the first trial, from hydra.sweeper.start;" in capsys.readouterr().out
    assert main([*args, "hydra.sweeper.start=none"]) == 0
    assert "start: none: the sampler proposes every trial" in capsys.readouterr().out
    assert main([*args, "hydra.sweeper.start={numAnalysisThreads:3}"]) == 2  # not in the space: refused up front
    assert "start.numAnalysisThreads=3: not a value" in capsys.readouterr().err
