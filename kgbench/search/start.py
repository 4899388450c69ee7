"""A search's first trial: where KataGo's own advice says throughput lies, or the user's own start point (pure).

KataGo's ``cpp/configs/analysis_example.cfg`` (v1.17.2, lines 98-152) says, for maximum total throughput with many
queries at once: a high ``numAnalysisThreads`` and ``numSearchThreadsPerAnalysisThread`` small ("e.g. 1,2,4"; its
example is 32 x 1), since threads on one search tree conflict and weaken it; and ``nnMaxBatchSize`` at least
``numAnalysisThreads x numSearchThreadsPerAnalysisThread`` (per GPU), so every thread's request fits one batch.
``hydra.sweeper.start`` (conf/hydra/sweeper/kgbench_optuna.yaml):

- ``katago`` (default): of the searched keys the advice speaks of, numAnalysisThreads at its largest value,
  numSearchThreadsPerAnalysisThread (or its alias numSearchThreads) at its smallest, nnMaxBatchSize at the smallest
  value >= their product (else its largest); the other keys are left to the sampler. No such key searched: no start.
- ``none`` (or null): no start, the sampler proposes every trial;
- a mapping ``{KEY: VALUE}``: the user's own start point, the values as the job runs them (the rest to the sampler).

``start_params`` returns the start as trial params (an ordered choice's index, as Optuna samples it), for
``study.enqueue_trial``: a partial config, whose other keys the sampler draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from optuna.distributions import FloatDistribution

from kgbench.search.space import SearchError, SearchSpace, as_number

__all__ = ["ADVICE", "FACTORS", "KATAGO", "describe_start", "shown", "start_params"]

KATAGO = "katago"
ANALYSIS = "numAnalysisThreads"
SEARCH = ("numSearchThreadsPerAnalysisThread", "numSearchThreads")  # the second: KataGo's older alias
BATCH = "nnMaxBatchSize"
FACTORS = (ANALYSIS, *SEARCH)  # nnMaxBatchSize's product: the config's values when they are not searched
ADVICE = "KataGo's advice for throughput (cpp/configs/analysis_example.cfg)"


def start_params(
    space: SearchSpace, setting: object, known: Mapping[str, object] | None = None
) -> dict[str, object] | None:
    """The start as trial params, or None (no start). ``setting``: ``katago``, ``none``/None or a mapping;
    ``known``: values of keys not searched (the config's, the space's fixed ones), for nnMaxBatchSize's product."""
    if isinstance(setting, Mapping):
        return _user_start(space, setting) or None
    if setting is None or setting is False or str(setting).lower() == "none":
        return None
    if str(setting) != KATAGO:
        raise SearchError(f"hydra.sweeper.start={setting!r}: use katago, none or a mapping {{KEY: VALUE}}")
    return _katago_start(space, {**(known or {}), **_fixed_values(space.fixed)}) or None


def describe_start(space: SearchSpace, params: Mapping[str, object] | None, setting: object) -> str:
    """One line for describe_search: the start and where it comes from."""
    if params is None:
        if str(setting) == KATAGO:
            return f"start: none ({ADVICE} speaks of none of the searched keys)"
        return "start: none: the sampler proposes every trial"
    where = "hydra.sweeper.start" if isinstance(setting, Mapping) else ADVICE
    rest = "" if len(params) == len(space.distributions) else "; the sampler picks the other keys"
    return f"start: {shown(space, params)}: the first trial, from {where}{rest}; hydra.sweeper.start=none: no start"


def shown(space: SearchSpace, params: Mapping[str, object]) -> str:
    """A start's params as the job runs them: ``numAnalysisThreads=4 numSearchThreadsPerAnalysisThread=1``."""
    return " ".join(f"{k}={v}" for k, v in space.values(params).items())


def _katago_start(space: SearchSpace, known: Mapping[str, object]) -> dict[str, object]:
    values: dict[str, float] = {}
    params: dict[str, object] = {}
    if ANALYSIS in space.distributions and (pick := _extreme(space, ANALYSIS, largest=True)) is not None:
        params[ANALYSIS], values[ANALYSIS] = pick
    for name in SEARCH:
        if name in space.distributions and (pick := _extreme(space, name, largest=False)) is not None:
            params[name], values[SEARCH[0]] = pick
    if BATCH in space.distributions:
        threads = values.get(ANALYSIS, as_number(known.get(ANALYSIS)))
        per = values.get(SEARCH[0], as_number(known.get(SEARCH[0])) or as_number(known.get(SEARCH[1])))
        if threads is not None and per is not None and (batch := _at_least(space, BATCH, threads * per)) is not None:
            params[BATCH] = batch
    return params


def _fixed_values(fixed: list[str]) -> dict[str, object]:
    """The space's fixed overrides (``++numAnalysisThreads=8``) as key -> value text."""
    pairs = (item.split("=", 1) for item in fixed if "=" in item)
    return {key.lstrip("+~"): value for key, value in pairs}


def _numbers(space: SearchSpace, name: str) -> list[tuple[object, float]] | None:
    """(param, value) pairs of a numeric finite parameter, or None (continuous or not numbers)."""
    params = space.choices(name)
    if params is None:
        return None
    pairs = [(p, as_number(space.values({name: p})[name])) for p in params]
    return None if any(v is None for _, v in pairs) else [(p, float(v or 0)) for p, v in pairs]


def _extreme(space: SearchSpace, name: str, largest: bool) -> tuple[object, float] | None:
    dist = space.distributions[name]
    if isinstance(dist, FloatDistribution):
        return (dist.high, dist.high) if largest else (dist.low, dist.low)
    pairs = _numbers(space, name)
    if not pairs:
        return None
    return (max if largest else min)(pairs, key=lambda pair: pair[1])


def _at_least(space: SearchSpace, name: str, product: float) -> object | None:
    pairs = _numbers(space, name)
    if not pairs:
        return None
    enough = [pair for pair in pairs if pair[1] >= product]
    return min(enough, key=lambda p: p[1])[0] if enough else max(pairs, key=lambda p: p[1])[0]


def _user_start(space: SearchSpace, setting: Mapping[Any, Any]) -> dict[str, object]:
    params: dict[str, object] = {}
    for key, value in setting.items():
        name = str(key).lstrip("+~")
        if name not in space.distributions:
            raise SearchError(f"hydra.sweeper.start.{name}: not a searched key (searched: "
                              f"{', '.join(space.distributions)})")  # fmt: skip
        params[name] = _param_of(space, name, value)
    return params


def _param_of(space: SearchSpace, name: str, value: object) -> object:
    """A value as the job runs it -> the trial param (an ordered choice's index); SearchError when not in the space."""
    param = space.param_of(name, value)
    if param is None:
        raise SearchError(f"hydra.sweeper.start.{name}={value!r}: not a value the search can take")
    return param
