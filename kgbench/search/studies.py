"""A study per measuring condition and space: which study of the journal a search continues, and why.

``hydra.sweeper.study_name`` names a *family* of studies; the study a search works on is
``<study_name>-<digest>``, the digest of its condition (kgbench.search.condition) and its space. So:

- the same command, on any node, under the same condition, continues the same study (the way to add workers);
- other fixed settings, another load, binary, network, machine or the sim against a real engine: another study,
  which measures its own jobs (``other_conditions: new``, the default), or a refusal naming what differs from the
  nearest study of the family (``other_conditions: refuse``: a worker that must join, not start anew);
- another space under the same condition: another study, never the old one's trials read with new params (an
  ordered choice's index means another value in a narrowed space); what the family measured under this condition
  and lies in the new space is copied into the new study by its values (``import_measured``: no job, no budget);
- a study of the family's bare name from before conditions were recorded is never continued (its condition is
  unknown).

The study keeps its condition, space and family (user attributes), and the search says which study it continues
and why (``Choice.lines``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.storages import BaseStorage
from optuna.study import StudySummary
from optuna.trial import TrialState, create_trial

from kgbench.search.attrs import FAMILY_ATTR, IMPORTED_ATTR, SPACE_ATTR, VALUES_ATTR, is_copy, is_measured
from kgbench.search.condition import CONDITION_ATTR, Condition
from kgbench.search.space import SearchError, SearchSpace, trial_key

__all__ = ["OTHER_CONDITIONS", "Choice", "choose_study", "import_measured", "mark_study", "study_name"]

OTHER_CONDITIONS = ("new", "refuse")  # hydra.sweeper.other_conditions


def study_name(family: str, condition: Condition, space: SearchSpace) -> str:
    text = json.dumps({"condition": condition.key(), "space": space.identity()}, sort_keys=True)
    return f"{family}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"


@dataclass(frozen=True)
class Choice:
    name: str  # the study to work on
    continued: bool  # it exists already
    lines: list[str] = field(default_factory=list)  # what the search says about it
    siblings: tuple[str, ...] = ()  # studies of the family under the same condition (another space)


def _family(summary: StudySummary, family: str) -> bool:
    return summary.user_attrs.get(FAMILY_ATTR) == family or summary.study_name == family


def choose_study(
    storage: BaseStorage, family: str, condition: Condition, space: SearchSpace, other_conditions: str = "new"
) -> Choice:
    """The study this search works on, and why; SearchError under ``other_conditions: refuse`` when the family has
    studies and none under this condition."""
    if other_conditions not in OTHER_CONDITIONS:
        raise SearchError(f"hydra.sweeper.other_conditions={other_conditions!r}: use new or refuse")
    name = study_name(family, condition, space)
    summaries = [s for s in optuna.get_all_study_summaries(storage, include_best_trial=False) if _family(s, family)]
    if any(s.study_name == name for s in summaries):
        trials = next(s.n_trials for s in summaries if s.study_name == name)
        return Choice(name, True, [f"Optuna study {name!r} continued: {trials} trial(s) so far, measured under "
                                   f"the same conditions and space ({condition.describe()})"])  # fmt: skip
    same, other = [], []
    for summary in summaries:
        theirs = Condition.from_attr(summary.user_attrs.get(CONDITION_ATTR))
        if theirs is not None and theirs.same(condition):
            same.append(summary.study_name)
        else:
            other.append((summary.study_name, theirs))
    # the nearest first: the fewest differences (a study whose condition was not recorded last)
    other.sort(key=lambda item: len(condition.differences(item[1], limit=99)) if item[1] else 10**6)
    why = []
    for other_name, theirs in other[:3]:
        if theirs is None:
            why.append(f"not {other_name!r}: its conditions were not recorded (made before kgbench recorded them)")
        else:
            differs = "; ".join(condition.differences(theirs))
            why.append(f"not {other_name!r}, measured under other conditions: {differs}")
    if other_conditions == "refuse" and other and not same:
        raise SearchError(f"hydra.sweeper.other_conditions=refuse: no study {family!r} in the journal was measured "
                          f"under these conditions: {why[0]}")  # fmt: skip
    lines = [f"Optuna study {name!r}: a new study ({condition.describe()})"]
    lines += [f"  {line}" for line in why]
    if len(other) > 3:
        lines.append(f"  and {len(other) - 3} more studies of {family!r} under other conditions")
    if same:
        lines.append(f"  the same conditions, another space: {', '.join(same)}; their measured configs that lie in "
                     "this space are copied in by value (no job)")  # fmt: skip
    return Choice(name, False, lines, tuple(same))


def mark_study(study: optuna.Study, family: str, condition: Condition, space: SearchSpace) -> None:
    """Record the study's family, condition and space (once: a continued study has them)."""
    attrs = study.user_attrs
    if attrs.get(CONDITION_ATTR) is None:
        study.set_user_attr(FAMILY_ATTR, family)
        study.set_user_attr(CONDITION_ATTR, condition.as_attr())
        study.set_user_attr(SPACE_ATTR, space.identity())


def _params_in(space: SearchSpace, condition: Condition, full: dict[str, Any]) -> dict[str, object] | None:
    """The params of ``full`` (a measured job's whole config: its study's condition and its values) in ``space``
    under ``condition``, or None when that job is not a config of this search."""
    for key in set(full) | set(condition.config):
        if key not in space.distributions and full.get(key) != condition.config.get(key, None):
            return None
    params = {}
    for name in space.distributions:
        if name not in full or (param := space.param_of(name, full[name])) is None:
            return None
        params[name] = param
    return params


def import_measured(
    study: optuna.Study, storage: BaseStorage, siblings: Sequence[str], condition: Condition, space: SearchSpace
) -> list[str]:
    """Copy into ``study`` every config a sibling study (same condition, another space) measured that is a config of
    this space: a trial with its value (or PRUNED) and intermediate values, ``kgbench.imported_from``. Idempotent
    (a config copied once is not copied again); the "<study>#<trial>" of each. Hold the ask lock."""
    have = {trial_key(t.params) for t in study.get_trials(deepcopy=False) if IMPORTED_ATTR in t.user_attrs}
    copied = []
    for sibling in siblings:
        other = optuna.load_study(study_name=sibling, storage=storage)
        theirs = Condition.from_attr(other.user_attrs.get(CONDITION_ATTR))
        if theirs is None or theirs.environment != condition.environment:
            continue
        for trial in other.get_trials(deepcopy=False):
            values = trial.user_attrs.get(VALUES_ATTR)
            if is_copy(trial) or not is_measured(trial) or not isinstance(values, dict):
                continue
            params = _params_in(space, condition, {**theirs.config, **values})
            if params is None or trial_key(params) in have:
                continue
            source = f"{sibling}#{trial.number}"
            study.add_trial(create_trial(
                state=trial.state,
                value=trial.value if trial.state == TrialState.COMPLETE else None,
                params=params,
                distributions={name: space.distributions[name] for name in params},
                user_attrs={IMPORTED_ATTR: source, VALUES_ATTR: space.values(params)},
                intermediate_values=dict(trial.intermediate_values),
            ))  # fmt: skip
            have.add(trial_key(params))
            copied.append(source)
    return copied
