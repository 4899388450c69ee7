"""A study per measuring condition and space (issue 36): the condition of a composed config, the study a search picks
and why, a refusal naming what differs, a narrowed space reading another study's trials by their values (never by
their params). Journal files in tmp_path; the searches on the simulated engine are in test_search_faults_sim.py."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from kgbench.search.attrs import FAILED_ATTR, IMPORTED_ATTR, VALUES_ATTR
from kgbench.search.condition import Condition, config_condition
from kgbench.search.journal import open_storage
from kgbench.search.space import SearchError, SearchSpace, parse_space
from kgbench.search.studies import choose_study, import_measured, mark_study, study_name
from tests.helpers.kgbench_runs import composed

ENV = {"engine": "kgserve.sim 1.17.2-sim", "network": "sha256:aa", "machine": "host1"}
WIDE = parse_space(["++numAnalysisThreads=tag(ordered, choice(4, 8, 16))", "backend=sim"])
NARROW = parse_space(["++numAnalysisThreads=tag(ordered, choice(8, 16))", "backend=sim"])


def condition(*overrides: str, space: SearchSpace = WIDE, **environment: str) -> Condition:
    cfg = composed("backend=sim", "load=smoke", *overrides)
    return Condition.of(config_condition(cfg, space.distributions), {**ENV, **environment})


def test_the_condition_is_the_config_less_the_searched_keys_and_what_measures_nothing() -> None:
    plain = condition()
    assert "numAnalysisThreads" not in plain.config  # searched
    assert plain.config["backend"] == "sim" and plain.config["nnMaxBatchSize"] == 128
    assert "load.concurrency" in plain.config and not any(k.startswith(("mlflow.", "race.")) for k in plain.config)
    assert condition().same(plain) and condition().key() == plain.key()
    fixed = condition("nnMaxBatchSize=1", "numSearchThreadsPerAnalysisThread=1")
    assert not fixed.same(plain)
    assert fixed.differences(plain) == ["nnMaxBatchSize: 128 -> 1", "numSearchThreadsPerAnalysisThread: 2 -> 1"]
    assert condition(machine="node-b").differences(plain) == ["machine: host1 -> node-b"]
    loaded = condition("load.concurrency=[4]")
    assert loaded.differences(plain)[0].startswith("load.concurrency: ")
    assert Condition.from_attr(plain.as_attr()) == plain  # as the journal gives it back


def test_a_study_per_condition_and_space(tmp_path: Path) -> None:
    storage = open_storage(tmp_path / "j.journal")
    plain, fixed = condition(), condition("nnMaxBatchSize=1")
    assert study_name("kgbench", plain, WIDE) != study_name("kgbench", fixed, WIDE)
    assert study_name("kgbench", plain, WIDE) != study_name("kgbench", plain, NARROW)
    first = choose_study(storage, "kgbench", plain, WIDE)
    assert not first.continued and first.name.startswith("kgbench-")
    study = optuna.create_study(study_name=first.name, storage=storage, direction="maximize")
    mark_study(study, "kgbench", plain, WIDE)
    assert choose_study(storage, "kgbench", condition(), WIDE).continued  # the same command again, on any node
    other = choose_study(storage, "kgbench", fixed, WIDE)
    assert not other.continued and other.name != first.name
    assert f"not {first.name!r}, measured under other conditions: nnMaxBatchSize: 128 -> 1" in "\n".join(other.lines)
    with pytest.raises(SearchError, match=r"other_conditions=refuse: .*nnMaxBatchSize: 128 -> 1"):
        choose_study(storage, "kgbench", fixed, WIDE, "refuse")
    narrow = choose_study(storage, "kgbench", plain, NARROW, "refuse")  # another space: not a refusal
    assert narrow.siblings == (first.name,)
    assert choose_study(storage, "elsewhere", fixed, WIDE, "refuse").lines  # another family: nothing to join
    optuna.create_study(study_name="legacy", storage=storage)  # a study from before conditions were recorded
    legacy = choose_study(storage, "legacy", plain, WIDE)
    assert not legacy.continued and "its conditions were not recorded" in "\n".join(legacy.lines)


def _measure(study: optuna.Study, space: SearchSpace, value: int, result: float, failed: bool = False) -> None:
    study.enqueue_trial({"numAnalysisThreads": space.param_of("numAnalysisThreads", value)})
    trial = study.ask(space.distributions)
    trial.set_user_attr(VALUES_ATTR, space.values(trial.params))
    if failed:
        trial.set_user_attr(FAILED_ATTR, True)
    trial.report(result, 0)
    study.tell(trial, result)


def test_a_narrowed_space_copies_in_what_it_holds_by_value(tmp_path: Path) -> None:
    storage = open_storage(tmp_path / "j.journal")
    plain = condition()
    wide = optuna.create_study(study_name=study_name("kgbench", plain, WIDE), storage=storage, direction="maximize")
    mark_study(wide, "kgbench", plain, WIDE)
    _measure(wide, WIDE, 4, 40.0)
    _measure(wide, WIDE, 8, 80.0)  # index 1 of the wide space; index 0 of the narrow one
    _measure(wide, WIDE, 16, 0.0, failed=True)  # a failed job: no measurement to copy
    narrow_condition = condition(space=NARROW)
    choice = choose_study(storage, "kgbench", narrow_condition, NARROW)
    narrow = optuna.create_study(study_name=choice.name, storage=storage, direction="maximize")
    mark_study(narrow, "kgbench", narrow_condition, NARROW)
    copied = import_measured(narrow, storage, choice.siblings, narrow_condition, NARROW)
    assert copied == [f"{wide.study_name}#1"]
    (trial,) = narrow.trials
    assert trial.params == {"numAnalysisThreads": 0} and NARROW.values(trial.params) == {"numAnalysisThreads": 8}
    assert trial.value == 80.0 and trial.user_attrs[IMPORTED_ATTR] == f"{wide.study_name}#1"
    assert trial.intermediate_values == {0: 80.0}
    assert import_measured(narrow, storage, choice.siblings, narrow_condition, NARROW) == []  # once
    # a study of another condition is never read, even for a config of this space
    fixed = condition("nnMaxBatchSize=1", space=NARROW)
    assert import_measured(narrow, storage, (wide.study_name,), fixed, NARROW) == []
