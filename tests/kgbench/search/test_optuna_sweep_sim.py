"""A real Optuna search on the simulated engine: `python -m kgbench -m backend=sim hparams_search=optuna ...`
in a subprocess, the study in a journal file, a poor config pruned after its first level, the study persisting."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from optuna.trial import TrialState

from tests.helpers.kgbench_runs import client_for, run_kgbench, runs_by_role, search_study

SPEED = {"KGSERVE_SIM_SPEED": "2"}


@pytest.mark.slow
def test_optuna_search_on_the_sim_prunes_and_persists(tmp_path: Path) -> None:
    journal = tmp_path / "shared" / "study.journal"
    args = [
        "-m", "backend=sim", "load=smoke", "load.concurrency=[2,4]", "hparams_search=optuna",
        "hydra.sweeper.params=null", "load.max_visits=choice(5,400)",
        f"hydra.sweeper.journal={journal}", "hydra.sweeper.study_name=sim-test",
        "hydra.sweeper.sampler.name=random", "hydra.sweeper.sampler.seed=6",  # draws 5, 5, 400 visits
        "hydra.sweeper.pruner.n_startup_trials=1",
    ]  # fmt: skip
    # speed 2: 400 visits make ~5 req/s at 4 in flight, 5 visits hundreds (the model's ~300; whatever a busy
    # machine's kgserve and load generator carry, 50 or more). At speed 20 the 400-visit cfg's 47 req/s came
    # within reach of what two busy cores carry of the 5-visit one, and the pruning turned on the machine
    code, out = run_kgbench(tmp_path, *args, "hydra.sweeper.n_trials=3", env=SPEED)
    assert code == 0, out
    assert "Traceback" not in out
    assert journal.exists()
    study = search_study(journal, "sim-test")
    trials = study.trials
    assert [t.params["load.max_visits"] for t in trials[:3]] == [5, 5, 400]
    # the second trial has the first one's params: no job, the first result is reused, no budget used; the next
    # proposal is the config not measured yet (400); then both configs are measured and the search stops
    assert trials[1].value == trials[0].value and trials[1].user_attrs["kgbench.reused_from"] == 0
    measured = [t for t in trials if "kgbench.reused_from" not in t.user_attrs]
    assert [t.number for t in measured] == [0, 2]
    # 400 visits per query is far slower than 5: below the others at the first level, pruned there
    assert [t.state for t in measured] == [TrialState.COMPLETE, TrialState.PRUNED]
    assert "every config of the space is measured (2 configs): the search stops" in out
    assert "trial 1 repeats trial 0's config: its result reused, no job, no budget used" in out
    assert "reused a measured result, no job: trials 1 (of 0)" in out
    assert sorted(trials[0].intermediate_values) == [0, 1]  # one value per concurrency level
    assert list(trials[2].intermediate_values) == [0]  # stopped after its first level
    assert trials[2].intermediate_values[0] < trials[0].intermediate_values[0]
    client = client_for(tmp_path)
    jobs = {run.data.tags["optuna.trial"]: run for run in runs_by_role(client, "job")}
    assert sorted(jobs) == ["0", "2"]
    pruned = jobs["2"]
    assert pruned.data.tags["kgbench.pruned"] == "true" and "pruned" in pruned.data.tags["kgbench.ladder_stop"]
    # levels run highest first under a search (load.order=descending): the pruned job measured only 4
    assert [m.step for m in client.get_metric_history(pruned.info.run_id, "level_req_per_s")] == [4]
    assert "search." not in pruned.data.tags["hydra_overrides"]
    # MLflow holds the metric to four significant digits (kgbench.track), the study the value as measured
    assert math.isclose(jobs["0"].data.metrics["req_per_s"], trials[0].value or 0.0, rel_tol=1e-3)
    results = (tmp_path / "multirun" / "optimization_results.yaml").read_text()
    assert "best_params" in results and "pruned: 1" in results
    # the study persists: the same command with a budget of 4 continues it (another worker would too); both
    # configs of this tiny space are measured already, so nothing is asked and no job runs (kgbench's exit status
    # 1: no job succeeded in this process)
    before = len(trials)
    code, out = run_kgbench(tmp_path, *args, "hydra.sweeper.n_trials=4", env=SPEED)
    assert code == 1 and "Traceback" not in out, out
    assert f"Optuna study {study.study_name!r} continued: {before} trial(s) so far" in out
    assert "every config of the space is measured (2 configs): the search stops" in out
    assert len(search_study(journal, "sim-test").trials) == before
    assert len(runs_by_role(client, "job")) == 2


@pytest.mark.slow
def test_the_search_starts_at_katagos_advice_and_stops_at_its_job_second_budget(tmp_path: Path) -> None:
    journal = tmp_path / "study.journal"
    args = [
        "-m", "backend=sim", "load=smoke", "load.concurrency=[4]", "hparams_search=optuna",
        "hydra.sweeper.params=null", "numAnalysisThreads=tag(ordered, choice(1, 2, 4))",
        "numSearchThreadsPerAnalysisThread=tag(ordered, choice(1, 2, 4))",
        f"hydra.sweeper.journal={journal}", "hydra.sweeper.study_name=start-test", "hydra.sweeper.sampler.seed=0",
    ]  # fmt: skip
    # a budget of 1 job-second, smaller than two jobs (than one, even): the first job runs, then the search stops
    code, out = run_kgbench(tmp_path, *args, "hydra.sweeper.n_trials=3", "hydra.sweeper.budget_s=1", env=SPEED)
    assert code == 0 and "Traceback" not in out, out
    assert "start: numAnalysisThreads=4 numSearchThreadsPerAnalysisThread=1: the first trial, from KataGo's" in out
    assert "start numAnalysisThreads=4 numSearchThreadsPerAnalysisThread=1: enqueued as the next trial" in out
    assert "another would pass hydra.sweeper.budget_s=1: the search stops" in out
    trials = search_study(journal, "start-test").trials
    assert len(trials) == 1  # one config measured: KataGo's advice, 4 x 1 (the indices of 4 and 1)
    assert trials[0].params == {"numAnalysisThreads": 2, "numSearchThreadsPerAnalysisThread": 0}
    job_s = trials[0].user_attrs["kgbench.job_s"]  # written by the job itself
    assert job_s > 0
    results = OmegaConf.load(tmp_path / "multirun" / "optimization_results.yaml")
    assert results.job_seconds == pytest.approx(job_s, abs=0.1) and results.budget_s == 1.0
    assert f"{job_s:.1f} job-seconds of 1)" in out  # the summary line
    # the study continued without a budget: its start is measured already, not run again; the sampler's next
    # proposal is a config not measured yet
    code, out = run_kgbench(tmp_path, *args, "hydra.sweeper.n_trials=2", env=SPEED)
    assert code == 0 and "Traceback" not in out, out
    assert "start numAnalysisThreads=4 numSearchThreadsPerAnalysisThread=1: trial 0 has it already" in out
    trials = search_study(journal, "start-test").trials
    measured = [t for t in trials if "kgbench.reused_from" not in t.user_attrs]
    assert len(measured) == 2 and measured[1].params != measured[0].params
    assert all(t.user_attrs["kgbench.job_s"] > 0 for t in measured)
    # a start of the user's own is measured first; start=none: the sampler's proposal, as before
    code, out = run_kgbench(tmp_path, *args, "hydra.sweeper.study_name=own", "hydra.sweeper.n_trials=1",
                            "hydra.sweeper.start={numAnalysisThreads:2,numSearchThreadsPerAnalysisThread:2}",
                            env=SPEED)  # fmt: skip
    assert code == 0 and "Traceback" not in out, out
    own = search_study(journal, "own").trials
    assert [t.params for t in own] == [{"numAnalysisThreads": 1, "numSearchThreadsPerAnalysisThread": 1}]
    code, out = run_kgbench(tmp_path, *args, "hydra.sweeper.study_name=none", "hydra.sweeper.n_trials=1",
                            "hydra.sweeper.start=none", env=SPEED)  # fmt: skip
    assert code == 0 and "Traceback" not in out, out
    assert "start: none: the sampler proposes every trial" in out and "enqueued" not in out
    (plain,) = search_study(journal, "none").trials
    assert "fixed_params" not in plain.system_attrs  # the sampler's own proposal (Optuna marks enqueued trials)
