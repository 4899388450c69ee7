"""The search's journal and leases (issue 36): a torn last line recovered, a corrupt line and an unwritable path refused
in one line naming the file, a running trial whose sweeper is gone taken for lost and its config measured again (the
start included), a failed job's value never reused nor reported as the best. Journal files in tmp_path; the search on
the simulated engine is in test_search_faults_sim.py."""

from __future__ import annotations

import json
import logging
import random
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from kgbench.search.asking import (
    ask_new,
    best_measured,
    enqueue_start,
    measured_keys,
    measured_trials,
    requeue_failed,
    requeue_lost,
    reuse_earlier,
)
from kgbench.search.attrs import FAILED_ATTR, LEASE_ATTR, LOST_ATTR, RETRIED_ATTR, REUSED_ATTR
from kgbench.search.journal import JournalError, check_readable, check_writable, open_storage
from kgbench.search.lease import LeaseKeeper, Owner, lease_value, lost_reason, reap_lost
from kgbench.search.space import parse_space, trial_key
from kgbench.search.study import tell_job

X = {"x": CategoricalDistribution((1, 2, 3))}


def new_study(journal: Path) -> optuna.Study:
    return optuna.create_study(study_name="s", storage=open_storage(journal), direction="maximize")


def test_a_torn_last_line_is_cut_off_before_the_next_write(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    journal = tmp_path / "j.journal"
    study = new_study(journal)
    done = study.ask(X)
    study.tell(done, 5.0)
    lines = journal.read_bytes().count(b"\n")
    with open(journal, "ab") as f:  # a writer killed mid-write: half an operation, no line end
        f.write(b'{"op_code":6,"worker_id":"w","trial_id":0,"sta')
    again = optuna.load_study(study_name="s", storage=open_storage(journal))  # read: the torn line is skipped
    assert again.trials[0].value == 5.0
    with caplog.at_level(logging.WARNING, logger="kgbench.search.journal"):
        again.set_user_attr("after", 1)  # the next write cuts it off first (Optuna's own would glue onto it)
    assert f"its last line (line {lines + 1}" in caplog.text and str(journal) in caplog.text
    text = journal.read_text().splitlines()
    assert all(isinstance(json.loads(line), dict) for line in text) and len(text) == lines + 1
    assert optuna.load_study(study_name="s", storage=open_storage(journal)).user_attrs["after"] == 1


def test_a_corrupt_line_is_refused_naming_the_file_and_the_line(tmp_path: Path) -> None:
    journal = tmp_path / "j.journal"
    study = new_study(journal)
    study.tell(study.ask(X), 5.0)
    lines = journal.read_text().splitlines()
    lines[2] = lines[2][:10] + "#" + lines[2][11:]
    journal.write_text("\n".join(lines) + "\n")
    with pytest.raises(JournalError) as caught:
        check_readable(journal)
    message = str(caught.value)
    assert f"the Optuna journal {journal} is corrupt at line 3 of {len(lines)}" in message and "\n" not in message
    with pytest.raises(JournalError, match="corrupt at line 3"):  # read through Optuna's storage: the same line
        open_storage(journal)


def test_an_unwritable_journal_path_is_refused_in_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(JournalError) as caught:
        check_writable(blocker / "sub" / "j.journal")
    assert str(caught.value).startswith(f"hydra.sweeper.journal={blocker / 'sub' / 'j.journal'}: cannot make")
    assert check_writable(tmp_path / "new" / "j.journal") == tmp_path / "new" / "j.journal"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_running_trial_is_lost_when_its_sweeper_is_gone_or_its_lease_ran_out(tmp_path: Path) -> None:
    study = new_study(tmp_path / "j.journal")
    me = Owner.me()
    now = time.time()

    def running(lease: dict[str, object] | None) -> optuna.trial.FrozenTrial:
        trial = study.ask(X)
        if lease is not None:
            trial.set_user_attr(LEASE_ATTR, lease)
        return study.trials[trial.number]

    assert lost_reason(running(lease_value(me, 60)), 60) is None  # held by this live process
    gone = Owner(me.host, _dead_pid(), me.started)
    assert "is gone" in (lost_reason(running(lease_value(gone, 60)), 60) or "")  # same host: at once
    reused_pid = Owner(me.host, me.pid, me.started - 100)  # this pid, but a process started earlier: not it
    assert "is gone" in (lost_reason(running(lease_value(reused_pid, 60)), 60) or "")
    other = Owner("node-b", 4242, 1.0)  # another node: only its lease tells
    assert lost_reason(running(lease_value(other, 60)), 60) is None
    assert "stopped renewing its lease" in (lost_reason(running(lease_value(other, 60, now - 61)), 60) or "")
    no_lease = running(None)
    assert lost_reason(no_lease, 60) is None  # just asked
    assert no_lease.datetime_start is not None
    asked = no_lease.datetime_start.timestamp()  # not the test's start: on busy cores the asks above take seconds
    assert "no lease" in (lost_reason(no_lease, 60, asked + 61) or "")  # asked by a kgbench without leases


def test_reaped_trials_cost_no_budget_and_their_configs_are_measured_again_once(tmp_path: Path) -> None:
    study = new_study(tmp_path / "j.journal")
    dead = Owner(Owner.me().host, _dead_pid(), 1.0)
    assert enqueue_start(study, {"x": 3}) is None  # the start
    start = study.ask(X)
    assert start.params == {"x": 3}
    start.set_user_attr(LEASE_ATTR, lease_value(dead, 60))  # its sweeper was killed while the job ran
    assert measured_trials(study) == 1
    assert [number for number, _ in reap_lost(study, 60)] == [start.number]
    frozen = study.trials[start.number]
    assert frozen.state == TrialState.FAIL and "is gone" in frozen.user_attrs[LOST_ATTR]
    assert measured_trials(study) == 0 and trial_key({"x": 3}) not in measured_keys(study)
    assert enqueue_start(study, {"x": 3}) is None  # the start is never lost: enqueued again
    enqueued, given_up = requeue_lost(study)
    assert enqueued == [] and given_up == []  # the start's config is enqueued already: not twice
    again = study.ask(X)
    assert again.params == {"x": 3}
    again.set_user_attr(LEASE_ATTR, lease_value(dead, 60))
    reap_lost(study, 60)  # lost a second time: not run a third
    assert requeue_lost(study) == ([], [start.number, again.number])
    assert trial_key({"x": 3}) in measured_keys(study)


def test_a_lost_config_is_enqueued_again(tmp_path: Path) -> None:
    study = new_study(tmp_path / "j.journal")
    trial = study.ask(X)
    study._storage.set_trial_user_attr(trial._trial_id, LOST_ATTR, "node gone")
    study._storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
    enqueued, _ = requeue_lost(study)
    assert enqueued == [(trial.number, trial.params)]
    assert requeue_lost(study) == ([], [])  # enqueued once
    assert study.ask(X).params == trial.params


def test_the_lease_keeper_renews_its_trials_until_told(tmp_path: Path) -> None:
    study = new_study(tmp_path / "j.journal")
    trial = study.ask(X)
    keeper = LeaseKeeper(study._storage, 40)
    keeper.hold(trial._trial_id)
    first = study.trials[trial.number].user_attrs[LEASE_ATTR]["until"]
    time.sleep(0.01)
    keeper.renew()
    assert study.trials[trial.number].user_attrs[LEASE_ATTR]["until"] > first
    study.tell(trial, 1.0)
    keeper.renew()  # told meanwhile: let go, no error
    assert keeper.held() == set()


def test_a_failed_jobs_value_is_never_reused_nor_the_best(tmp_path: Path) -> None:
    study = new_study(tmp_path / "j.journal")
    failed = study.ask(X)
    tell_job(study, failed, None, 0.0)  # e.g. the MLflow store refused the job: told 0 for the sampler
    assert study.trials[failed.number].user_attrs[FAILED_ATTR] is True
    assert best_measured(study) is None  # not "Best trial 0 -> 0"
    study.enqueue_trial(failed.params)
    repeat = study.ask(X)
    assert reuse_earlier(study, repeat) is False  # another worker proposing it: no value passed on
    study.tell(repeat, state=TrialState.FAIL)
    space = parse_space(["++x=choice(1, 2, 3)"])
    study.enqueue_trial(failed.params)
    fresh, repeats = ask_new(study, space, random.Random(0))
    assert repeats and repeats[0][1:] == (failed.number, "failed")
    told = study.trials[repeats[0][0]]
    assert told.state == TrialState.FAIL and told.user_attrs[REUSED_ATTR] == failed.number and told.value is None
    assert fresh is not None and fresh.params != failed.params
    study.tell(fresh, 7.0)
    best = best_measured(study)
    assert best is not None and best.number == fresh.number


def test_retry_failed_measures_a_failed_config_again_once(tmp_path: Path) -> None:
    study = new_study(tmp_path / "j.journal")
    failed = study.ask(X)
    tell_job(study, failed, None, 0.0)  # the shared MLflow store was down
    assert measured_trials(study) == 1 and trial_key(failed.params) in measured_keys(study)
    assert requeue_failed(study) == [(failed.number, failed.params)]
    assert measured_trials(study) == 0 and study.user_attrs[RETRIED_ATTR] == [failed.number]
    assert requeue_failed(study) == []  # once per failure
    again = study.ask(X)
    assert again.params == failed.params and reuse_earlier(study, again) is False
    study.tell(again, 9.0)
    best = best_measured(study)
    assert best is not None and best.number == again.number
