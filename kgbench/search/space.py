"""Hydra sweep overrides -> Optuna distributions, and a sampled trial -> the overrides of its job (pure).

``key=choice(a, b, c)`` -> categorical (unordered: TPE learns each value on its own);
``key=tag(ordered, choice(16, 32, 64))`` -> the same values, ordered: Optuna samples the index (an integer
0..n-1, so TPE can learn that 64 lies between 32 and 128), the job gets the value;
``key=range(lo, hi[, step])`` -> integers lo, lo+step, ... < hi;
``key=interval(lo, hi)`` -> uniform floats; ``key=tag(log, interval(lo, hi))`` -> the same on a log scale.
Any other override is fixed: every job of the search gets it as written. Optuna's parameter names are the keys
without Hydra's ``+``/``++`` prefix (``nnMaxBatchSize``, ``load.max_visits``).

A space of choices and ranges only is finite (``size``): a search on it never measures a config twice, and a
proposal that repeats a measured one is moved to the nearest config not measured yet (``nearest_unmeasured``).
``describe`` is the space as `python -m kgbench --space ...` and the sweeper print it before any job runs.
``identity`` is what a study keeps of its space (kgbench.search.studies: a study per condition and space), and
``param_of`` maps a value a job ran back to this space's param, so trials of another space are read by their values,
never by their params (an ordered choice's index means another value in a narrowed space).
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, Override, RangeSweep
from optuna.distributions import (
    BaseDistribution,
    CategoricalChoiceType,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
    distribution_to_json,
)

__all__ = ["SearchError", "SearchSpace", "as_number", "distribution", "parse_space", "same_value", "trial_key"]


class SearchError(ValueError):
    """A search setting that cannot work (one line, names the setting)."""


def trial_key(params: Mapping[str, object]) -> tuple[object, ...]:
    """A config's identity among trials (its params in name order)."""
    return tuple((name, params[name]) for name in sorted(params))


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

    def choices(self, name: str) -> tuple[object, ...] | None:
        """The params a finite parameter can take (an ordered choice's indices), None for a continuous one."""
        dist = self.distributions[name]
        if isinstance(dist, CategoricalDistribution):
            return tuple(dist.choices)
        if isinstance(dist, IntDistribution) and not dist.log:
            return tuple(range(dist.low, dist.high + 1, dist.step))
        return None

    @property
    def size(self) -> int | None:
        """How many configs the space holds; None when a parameter is continuous (interval)."""
        counts = [self.choices(name) for name in self.distributions]
        return None if any(c is None for c in counts) else math.prod(len(c or ()) for c in counts)

    def configs(self) -> Iterator[dict[str, object]]:
        """Every config of a finite space, as trial params."""
        names = list(self.distributions)
        pools = [self.choices(name) or () for name in names]
        for combo in itertools.product(*pools):
            yield dict(zip(names, combo, strict=True))

    def nearest_unmeasured(
        self, params: Mapping[str, object], measured: set[tuple[object, ...]], rng: random.Random
    ) -> dict[str, object] | None:
        """The config nearest ``params`` that is not in ``measured`` (``trial_key``s): per parameter, an ordered one
        (ordered choice, range) counts its distance in steps over its span, an unordered choice 1 when it differs;
        ties are broken by ``rng``. None when the space is continuous or every config was measured."""
        if self.size is None:
            return None
        best: list[dict[str, object]] = []
        best_d = math.inf
        for config in self.configs():
            if trial_key(config) in measured:
                continue
            d = sum(self._distance(name, params.get(name), config[name]) for name in config)
            if d < best_d - 1e-12:
                best, best_d = [config], d
            elif abs(d - best_d) <= 1e-12:
                best.append(config)
        return rng.choice(best) if best else None

    def _distance(self, name: str, a: object, b: object) -> float:
        pool = self.choices(name) or ()
        if isinstance(self.distributions[name], IntDistribution) and len(pool) > 1:
            return abs(pool.index(a) - pool.index(b)) / (len(pool) - 1) if a in pool and b in pool else 1.0
        return 0.0 if a == b else 1.0

    def param_of(self, name: str, value: object) -> object | None:
        """A value as a job runs it -> this space's param for ``name`` (an ordered choice's index), None when the
        space cannot take it."""
        dist = self.distributions[name]
        if name in self.ordered:
            return next((i for i, choice in enumerate(self.ordered[name]) if same_value(choice, value)), None)
        if isinstance(dist, CategoricalDistribution):
            return next((choice for choice in dist.choices if same_value(choice, value)), None)
        number = as_number(value)
        if number is None:
            return None
        if isinstance(dist, IntDistribution):
            return int(number) if number in (self.choices(name) or ()) else None
        assert isinstance(dist, FloatDistribution)
        return float(number) if dist.low <= number <= dist.high else None

    def identity(self) -> dict[str, object]:
        """The space as JSON-able data (each parameter's distribution, an ordered choice's values): what a study
        keeps of it, and what tells two spaces apart."""
        return {
            name: {"distribution": json.loads(distribution_to_json(dist)), "values": list(self.ordered.get(name, ()))}
            for name, dist in sorted(self.distributions.items())
        }

    def describe(self) -> list[str]:
        """The space, one line per parameter, then its size and the fixed overrides."""
        width = max((len(name) for name in self.distributions), default=0)
        lines = []
        for name, dist in self.distributions.items():
            if name in self.ordered:
                kind, shown = "ordered choice", ", ".join(_text(v) for v in self.ordered[name])
            elif isinstance(dist, CategoricalDistribution):
                kind, shown = "choice", ", ".join(_text(v) for v in dist.choices)
            elif isinstance(dist, IntDistribution):
                kind, shown = "range", ", ".join(str(v) for v in self.choices(name) or ())
            else:
                assert isinstance(dist, FloatDistribution)
                kind, shown = "interval" + (" (log)" if dist.log else ""), f"{dist.low:g} .. {dist.high:g}"
            lines.append(f"  {name.ljust(width)}  {kind:<15} {shown}")
        size = self.size
        lines.append(f"  {size} configs" if size is not None else "  continuous (an interval): no finite count")
        lines.append(f"  fixed: {' '.join(self.fixed) or '-'}")
        return lines


def _text(value: object) -> str:
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def as_number(value: object) -> float | None:
    """A number, or a number's text, as a float; None for anything else (booleans included)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    try:
        return float(str(value))
    except ValueError:
        return None


def same_value(choice: object, value: object) -> bool:
    """Whether a job's value is this choice: equal, the same number (``64`` and ``64.0``) or the same text."""
    if choice == value:
        return True
    a, b = as_number(choice), as_number(value)
    return (a is not None and b is not None and a == b) or str(choice) == str(value)


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
        name = key.lstrip("+~")
        # a key given again replaces its earlier entry (hydra.sweeper.params first, then the command line): a
        # searched key fixed on the command line leaves the space, a fixed one given a sweep joins it
        for table in (distributions, keys, ordered):
            table.pop(name, None)
        fixed = [item for item in fixed if item.split("=", 1)[0].lstrip("+~") != name]
        if override.is_sweep_override():
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
