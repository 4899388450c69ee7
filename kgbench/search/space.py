"""Hydra sweep overrides -> Optuna distributions, and a sampled trial -> the overrides of its job (pure).

``key=choice(a, b, c)`` -> categorical (unordered: TPE learns each value on its own);
``key=tag(ordered, choice(16, 32, 64))`` -> the same values, ordered: Optuna samples the index (an integer
0..n-1, so TPE can learn that 64 lies between 32 and 128), the job gets the value;
``key=range(lo, hi[, step])`` -> integers lo, lo+step, ... < hi;
``key=interval(lo, hi)`` -> uniform floats; ``key=tag(log, interval(lo, hi))`` -> the same on a log scale.
Any other override is fixed: every job of the search gets it as written. Optuna's parameter names are the keys
without Hydra's ``+``/``++`` prefix (``nnMaxBatchSize``, ``load.max_visits``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, Override, RangeSweep
from optuna.distributions import (
    BaseDistribution,
    CategoricalChoiceType,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from kgbench.search.study import SearchError

__all__ = ["SearchSpace", "distribution", "parse_space"]


@dataclass(frozen=True)
class SearchSpace:
    distributions: dict[str, BaseDistribution]  # parameter name -> distribution
    keys: dict[str, str]  # parameter name -> its override key as written (with its ++ prefix)
    fixed: list[str]  # overrides every job gets
    ordered: dict[str, tuple[object, ...]] = field(default_factory=dict)  # name -> values of an ordered choice

    def values(self, params: Mapping[str, object]) -> dict[str, object]:
        """A trial's sampled params -> the values its job runs with (an ordered choice's index -> its value)."""
        return {
            name: self.ordered[name][int(str(value))] if name in self.ordered else value
            for name, value in params.items()
        }

    def overrides(self, params: Mapping[str, object]) -> list[str]:
        """A trial's sampled params -> its job's overrides (the fixed ones first)."""
        values = self.values(params)
        return [*self.fixed, *(f"{self.keys[name]}={_text(value)}" for name, value in values.items())]


def _text(value: object) -> str:
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _number(value: object) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SearchError(f"not a number: {value!r}")
    return value


def distribution(override: Override) -> BaseDistribution:
    """The distribution of one sweep override (``override.is_sweep_override()`` must be true)."""
    sweep = override.value()
    key = override.get_key_element()
    if isinstance(sweep, ChoiceSweep):
        choices: list[CategoricalChoiceType] = []
        for item in override.sweep_iterator():
            if not isinstance(item, str | int | float | bool) and item is not None:
                raise SearchError(f"{key}: choice values must be plain scalars, got {item!r}")
            choices.append(item)
        return CategoricalDistribution(choices)
    if isinstance(sweep, RangeSweep):
        values = [_number(v) for v in override.sweep_iterator()]
        if not values:
            raise SearchError(f"{key}: the range is empty")
        if all(isinstance(v, int) for v in values):
            step = int(values[1] - values[0]) if len(values) > 1 else 1
            return IntDistribution(int(values[0]), int(values[-1]), step=step)
        return CategoricalDistribution(values)
    if isinstance(sweep, IntervalSweep):
        return FloatDistribution(float(_number(sweep.start)), float(_number(sweep.end)), log="log" in sweep.tags)
    raise SearchError(f"{key}: unsupported sweep {override.input_line!r}: use choice, range or interval")


def parse_space(overrides: Sequence[str]) -> SearchSpace:
    """Parse override strings (``key=value`` or sweeps) into the search space."""
    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception as exc:  # hydra's OverrideParseException and friends: one line for the user
        raise SearchError(f"cannot parse the search space: {exc}") from None
    distributions: dict[str, BaseDistribution] = {}
    keys: dict[str, str] = {}
    fixed: list[str] = []
    ordered: dict[str, tuple[object, ...]] = {}
    for override in parsed:
        key = override.get_key_element()
        if override.is_sweep_override():
            name = key.lstrip("+~")
            dist = distribution(override)
            sweep = override.value()
            if isinstance(sweep, ChoiceSweep) and "ordered" in sweep.tags:
                assert isinstance(dist, CategoricalDistribution)
                ordered[name] = tuple(dist.choices)
                dist = IntDistribution(0, len(dist.choices) - 1)
            distributions[name] = dist
            keys[name] = key
        else:
            fixed.append(f"{key}={override.get_value_element_as_str()}")
    return SearchSpace(distributions, keys, fixed, ordered)
