"""Issue 36's search failures, each as a user meets it: `python -m kgbench -m backend=sim hparams_search=optuna ...` in
a subprocess, the study in a journal file. A search under other fixed settings measures its own jobs; a shifted space
reads the old study by value; a refusal is one line before any job; a SIGKILLed sweeper's trial (the start) is
measured again on the rerun, past a torn journal line; two sweepers on one study measure each config once, never
pass on a failed job's value, and report the same best."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from optuna.trial import TrialState

from kgbench.search.attrs import FAILED_ATTR, IMPORTED_ATTR, LOST_ATTR, REUSED_ATTR
from tests.helpers.kgbench_runs import (
    client_for,
    run_kgbench,
    runs_by_role,
    search_studies,
    search_study,
    study_named,
)
from tests.helpers.mlflow_store import seeded_uri

SPEED = {"KGSERVE_SIM_SPEED": "20"}  # a smoke job in ~10 s; the figures are not what these tests look at
SEARCH = ["-m", "backend=sim", "load=smoke", "load.concurrency=[4]", "hparams_search=optuna",
          "hydra.sweeper.params=null", "hydra.sweeper.sampler.seed=0"]  # fmt: skip
WIDE = "numAnalysisThreads=tag(ordered, choice(4, 8))"


def _threads(run: object) -> str:
    return run.data.params["katago.numAnalysisThreads"]  # type: ignore[attr-defined]


@pytest.mark.slow
@pytest.mark.timeout(900)  # several searches in a row on a loaded 2-core machine
def test_a_search_under_other_conditions_measures_its_own_jobs_and_a_shifted_space_reads_values(
    tmp_path: Path,
) -> None:
    journal = tmp_path / "study.journal"
    args = [*SEARCH, f"hydra.sweeper.journal={journal}"]
    code, out = run_kgbench(tmp_path, *args, WIDE, "hydra.sweeper.n_trials=1", env=SPEED)
    assert code == 0 and "Traceback" not in out, out
    first = search_studies(journal, "kgbench")
    assert len(first) == 1 and f"Optuna study {first[0]!r}: a new study" in out
    client = client_for(tmp_path)
    assert [_threads(r) for r in runs_by_role(client, "job")] == ["8"]  # the start: the most threads
    # the case: the same search with two keys fixed used to run 0 jobs and report the first's figure
    fixed = ["nnMaxBatchSize=1", "numSearchThreadsPerAnalysisThread=1"]
    code, out = run_kgbench(tmp_path, *args, WIDE, *fixed, "hydra.sweeper.n_trials=1", env=SPEED)
    assert code == 0 and "Traceback" not in out, out
    assert (f"not {first[0]!r}, measured under other conditions: nnMaxBatchSize: 128 -> 1; "
            "numSearchThreadsPerAnalysisThread: 2 -> 1") in out  # fmt: skip
    assert "reused a measured result" not in out and "copied in" not in out
    jobs = runs_by_role(client, "job")
    assert len(jobs) == 2 and len(search_studies(journal, "kgbench")) == 2
    # a worker that must join a study refuses other conditions, in one line, before any job
    code, out = run_kgbench(tmp_path, *args, WIDE, "nnMaxBatchSize=2", "hydra.sweeper.other_conditions=refuse",
                            "hydra.sweeper.n_trials=1", env=SPEED)  # fmt: skip
    assert code == 2 and "Traceback" not in out, out
    assert re.search(r"kgbench: hydra.sweeper.other_conditions=refuse: .*nnMaxBatchSize: (128|1) -> 2", out), out
    assert len(runs_by_role(client, "job")) == 2
    # a shifted space (8, 16) on the old journal: 8 is read by its value (the old study's index 1, the new one's
    # index 0), copied in, not run again; the job measures 16 (the old code mapped the old index onto 16, or crashed
    # with an IndexError on a narrower space)
    code, out = run_kgbench(tmp_path, *args, "numAnalysisThreads=tag(ordered, choice(8, 16))",
                            "hydra.sweeper.n_trials=1", env=SPEED)  # fmt: skip
    assert code == 0 and "Traceback" not in out, out
    assert f"copied in: 1 measured config(s) of this space ({first[0]}#0)" in out
    assert sorted(_threads(r) for r in runs_by_role(client, "job")) == ["16", "8", "8"]
    *_, shifted = search_studies(journal, "kgbench")  # the newest study
    copied = [t for t in study_named(journal, shifted).trials if IMPORTED_ATTR in t.user_attrs]
    assert len(copied) == 1 and copied[0].params == {"numAnalysisThreads": 0}
    assert copied[0].value == study_named(journal, first[0]).trials[0].value


@pytest.mark.slow
def test_an_unwritable_or_corrupt_journal_is_refused_in_one_line_before_any_job(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code, out = run_kgbench(tmp_path, *SEARCH, WIDE, f"hydra.sweeper.journal={blocker}/j.journal", env=SPEED)
    assert code == 2 and "Traceback" not in out, out
    (line,) = [line for line in out.splitlines() if "hydra.sweeper.journal=" in line]
    assert line.startswith(f"kgbench: hydra.sweeper.journal={blocker}/j.journal: cannot make its folder")
    journal = tmp_path / "corrupt.journal"
    journal.write_text('{"op_code":0,"worker_id":"w","study_name":"x","directions":[1]}\n{not json\n')
    code, out = run_kgbench(tmp_path, *SEARCH, WIDE, f"hydra.sweeper.journal={journal}", env=SPEED)
    assert code == 2 and "Traceback" not in out, out
    assert f"kgbench: the Optuna journal {journal} is corrupt at line 2 of 2 (not JSON: " in out
    kgbench = [e for e in client_for(tmp_path).search_experiments() if e.name.startswith("kgbench")]
    assert not kgbench  # nothing recorded: no sweep's run, no job


def _start_search(tmp_path: Path, args: list[str], name: str) -> tuple[subprocess.Popen[bytes], Path]:
    """`python -m kgbench ARGS` as run_kgbench runs it, in the background and in its own session (so its whole tree,
    kgserve and the sim, can be SIGKILLed); its output goes to NAME.log."""
    env = {**os.environ, "MLFLOW_TRACKING_URI": seeded_uri(tmp_path / "mlflow.db"), "PYTHONUNBUFFERED": "1",
           "KGSERVE_SIM_DEVICE": f"kgbench-test-{os.getpid()}-{tmp_path.name}", **SPEED}  # fmt: skip
    log = tmp_path / f"{name}.log"
    argv = [sys.executable, "-m", "kgbench", *args, f"hydra.sweep.dir={tmp_path / name}"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return proc, log


@pytest.mark.slow
@pytest.mark.timeout(900)  # several searches in a row on a loaded 2-core machine
def test_a_killed_sweepers_trial_is_measured_again_on_the_rerun(tmp_path: Path) -> None:
    journal = tmp_path / "study.journal"
    args = [*SEARCH, WIDE, f"hydra.sweeper.journal={journal}", "hydra.sweeper.n_trials=2"]
    proc, log = _start_search(tmp_path, args, "killed")
    try:
        deadline = time.monotonic() + 240
        while b"measure w0" not in log.read_bytes():  # the first job (the start) is measuring
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # what walltime, preemption or a lost node do to the sweeper and its job
        proc.wait(timeout=30)
    with open(journal, "ab") as f:  # and a write it was in the middle of: a torn last line
        f.write(b'{"op_code":6,"worker_id":"gone","trial_id":0,"state":1,"val')
    (killed,) = search_study(journal, "kgbench").trials
    assert killed.state == TrialState.RUNNING  # for good, before leases
    code, out = run_kgbench(tmp_path, *args, env=SPEED)  # the documented way to continue
    assert code == 0 and "Traceback" not in out, out
    assert f"the Optuna journal {journal}: its last line" in out and "was torn" in out
    assert f"trial 0 was lost: its sweeper (pid {proc.pid} on " in out
    assert "trial 0's config numAnalysisThreads=8 enqueued to be measured again" in out
    trials = search_study(journal, "kgbench").trials
    assert trials[0].state == TrialState.FAIL and "is gone" in trials[0].user_attrs[LOST_ATTR]
    again = [t for t in trials[1:] if t.params == killed.params and REUSED_ATTR not in t.user_attrs]
    assert len(again) == 1 and again[0].state == TrialState.COMPLETE  # the start, measured this time
    measured = [t for t in trials if t.state == TrialState.COMPLETE and REUSED_ATTR not in t.user_attrs]
    assert len(measured) == 2  # n_trials=2: the lost trial cost none of it
    best = max(measured, key=lambda t: t.value or 0.0)
    assert f"Best trial {best.number}: " in out
    threads = sorted(_threads(r) for r in runs_by_role(client_for(tmp_path), "job") if r.info.status == "FINISHED")
    assert threads == ["4", "8"]


def _best_line(out: str) -> str:
    (line,) = [line.split("]", 1)[1] for line in out.splitlines() if "] Best trial " in line]
    return line.split(" (", 1)[0]  # without the counts, which say what this worker saw while it ran


@pytest.mark.slow
@pytest.mark.timeout(900)  # several searches in a row on a loaded 2-core machine
def test_two_sweepers_on_one_study_measure_each_config_once_and_agree_on_the_best(tmp_path: Path) -> None:
    journal = tmp_path / "study.journal"
    # 4 configs, 2 of them fail at once (engines=0: a job that cannot start, like one refused by its MLflow store)
    args = [*SEARCH, "numAnalysisThreads=tag(ordered, choice(2, 4))", "engines=choice(0, 1)",
            f"hydra.sweeper.journal={journal}", "hydra.sweeper.n_trials=4"]  # fmt: skip
    client_for(tmp_path).search_experiments()  # the MLflow store made first: two first writers race on its schema
    started = [_start_search(tmp_path, args, f"sweeper-{i}") for i in range(2)]
    try:
        for proc, _ in started:
            proc.wait(timeout=600)
    finally:
        for proc, _ in started:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
    outs = [log.read_text() for _, log in started]
    for (proc, _), out in zip(started, outs, strict=True):
        assert proc.returncode == 0 and "Traceback" not in out, out[-4000:]
    trials = search_study(journal, "kgbench").trials
    ran = [t for t in trials if REUSED_ATTR not in t.user_attrs]
    assert sorted(str(t.params) for t in ran) == sorted({str(t.params) for t in ran})  # each config once
    assert len(ran) == 4
    failed = [t for t in ran if t.user_attrs.get(FAILED_ATTR)]
    assert sorted(t.params["engines"] for t in failed) == [0, 0]
    assert all("engines=0" in t.user_attrs["kgbench.failure"] for t in failed)
    for copy in (t for t in trials if REUSED_ATTR in t.user_attrs):  # a repeat of a failed config got no value
        assert copy.value is None or copy.user_attrs[REUSED_ATTR] not in {t.number for t in failed}
    assert _best_line(outs[0]) == _best_line(outs[1]) and "engines': 1" in _best_line(outs[0])
    jobs = runs_by_role(client_for(tmp_path), "job")
    assert len(jobs) == 4  # one MLflow job per config, between the two sweepers
