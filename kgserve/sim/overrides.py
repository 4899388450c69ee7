"""A query's `overrideSettings`, checked as KataGo's analysis engine checks them (analysis.cpp, Setup::loadParams).

KataGo copies the engine's cfg, marks every key of it used, lays the overrides over it (values as strings:
a JSON string as is, anything else as its JSON text; an empty string deletes the key), then re-reads the search
parameters in a fixed order with the cfg's typed getters: the first bad one is an error (`Could not set
settings: ...`, naming the cfg file "and/or command-line and query overrides"). Override keys neither in the cfg
nor read are reported, sorted, in one `Unknown config params` warning.

A valid `humanSLProfile` name (SGFMetadata::getProfile) is reported in `Overridden.human_sl_profile`: the sim's
nets have no human-SL input, so the caller refuses the query as KataGo does, after the unknown-keys warning.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kgserve.katago._nlohmann_dump import dump
from kgserve.katago.rules import WHITESPACE, ascii_lower, float32
from kgserve.sim.board import parse_player

__all__ = ["Overridden", "OverrideError", "apply_overrides", "human_sl_profile", "human_sl_unused"]

_I64 = (1, 1 << 50)
# (getter, key, min, max) in the order Setup::loadParams reads them (loadSingleConfigOnly: no index suffix)
SEARCH_KEYS: list[tuple[str, str, Any, Any]] = [
    ("Int", "numBots", 1, 4096),
    ("Int64", "maxPlayouts", *_I64), ("Int64", "maxVisits", *_I64), ("Double", "maxTime", 0.0, 1.0e20),
    ("Int64", "maxPlayoutsPondering", *_I64), ("Int64", "maxVisitsPondering", *_I64),
    ("Double", "maxTimePondering", 0.0, 1.0e20), ("Double", "lagBuffer", 0.0, 3600.0),
    ("Double", "searchFactorAfterOnePass", 0.0, 1.0), ("Double", "searchFactorAfterTwoPass", 0.0, 1.0),
    ("Int", "numSearchThreads", 1, 4096), ("Double", "minPlayoutsPerThread", 0.0, 1.0e20),
    ("Double", "winLossUtilityFactor", 0.0, 1.0), ("Double", "staticScoreUtilityFactor", 0.0, 1.0),
    ("Double", "dynamicScoreUtilityFactor", 0.0, 1.0), ("Double", "noResultUtilityForWhite", -1.0, 1.0),
    ("Double", "drawEquivalentWinsForWhite", 0.0, 1.0), ("Double", "dynamicScoreCenterZeroWeight", 0.0, 1.0),
    ("Double", "dynamicScoreCenterScale", 0.2, 5.0), ("Double", "cpuctExploration", 0.0, 10.0),
    ("Double", "cpuctExplorationLog", 0.0, 10.0), ("Double", "cpuctExplorationBase", 10.0, 100000.0),
    ("Double", "cpuctUtilityStdevPrior", 1e-8, 10.0), ("Double", "cpuctUtilityStdevPriorWeight", 0.0, 100.0),
    ("Double", "cpuctUtilityStdevScale", 0.0, 1.0), ("Double", "fpuReductionMax", 0.0, 2.0),
    ("Double", "fpuLossProp", 0.0, 1.0), ("Bool", "fpuParentWeightByVisitedPolicy", None, None),
    ("Double", "fpuParentWeightByVisitedPolicyPow", 0.0, 5.0), ("Double", "fpuParentWeight", 0.0, 1.0),
    ("Double", "policyOptimism", 0.0, 1.0), ("Double", "valueWeightExponent", 0.0, 1.0),
    ("Bool", "useNoisePruning", None, None), ("Double", "noisePruneUtilityScale", 0.001, 10.0),
    ("Double", "noisePruningCap", 0.0, 1e50), ("Bool", "useUncertainty", None, None),
    ("Double", "uncertaintyCoeff", 0.0001, 1.0), ("Double", "uncertaintyExponent", 0.0, 2.0),
    ("Double", "uncertaintyMaxWeight", 1.0, 100.0), ("Bool", "useGraphSearch", None, None),
    ("Int", "graphSearchRepBound", 3, 50), ("Double", "graphSearchCatchUpLeakProb", 0.0, 1.0),
    ("Bool", "rootNoiseEnabled", None, None), ("Double", "rootDirichletNoiseTotalConcentration", 0.001, 10000.0),
    ("Double", "rootDirichletNoiseWeight", 0.0, 1.0), ("Double", "rootPolicyTemperature", 0.01, 100.0),
    ("Double", "rootPolicyTemperatureEarly", 0.01, 100.0), ("Double", "rootFpuReductionMax", 0.0, 2.0),
    ("Double", "rootFpuLossProp", 0.0, 1.0), ("Int", "rootNumSymmetriesToSample", 1, 8),
    ("Bool", "rootSymmetryPruning", None, None), ("Double", "rootDesiredPerChildVisitsCoeff", 0.0, 100.0),
    ("Double", "rootPolicyOptimism", 0.0, 1.0), ("Double", "chosenMoveTemperature", 0.0, 5.0),
    ("Double", "chosenMoveTemperatureEarly", 0.0, 5.0), ("Double", "chosenMoveTemperatureHalflife", 0.1, 100000.0),
    ("Double", "chosenMoveTemperatureOnlyBelowProb", 0.0, 1.0), ("Double", "chosenMoveSubtract", 0.0, 1.0e10),
    ("Double", "chosenMovePrune", 0.0, 1.0e10), ("Bool", "useLcbForSelection", None, None),
    ("Double", "lcbStdevs", 1.0, 12.0), ("Double", "minVisitPropForLCB", 0.0, 1.0),
    ("Bool", "useNonBuggyLcb", None, None), ("Double", "rootEndingBonusPoints", -1.0, 1.0),
    ("Bool", "rootPruneUselessMoves", None, None), ("Bool", "conservativePass", None, None),
    ("Bool", "fillDameBeforePass", None, None), ("Enabled", "alwaysComputePassAliveUnderSuicideRules", None, None),
    ("Double", "wideRootNoise", 0.0, 5.0), ("Bool", "enablePassingHacks", None, None),
    ("Bool", "enableMorePassingHacks", None, None), ("Double", "playoutDoublingAdvantage", -3.0, 3.0),
    ("Player", "playoutDoublingAdvantagePla", None, None), ("Double", "avoidRepeatedPatternUtility", -3.0, 3.0),
    ("Float", "nnPolicyTemperature", 0.01, 5.0), ("Bool", "antiMirror", None, None),
    ("Bool", "ignorePreRootHistory", None, None), ("Bool", "ignoreAllHistory", None, None),
    ("Double", "subtreeValueBiasFactor", 0.0, 1.0), ("Double", "subtreeValueBiasFreeProp", 0.0, 1.0),
    ("Double", "subtreeValueBiasWeightExponent", 0.0, 1.0), ("Bool", "useEvalCache", None, None),
    ("Int64", "evalCacheMinVisits", *_I64), ("Int", "nodeTableShardsPowerOfTwo", 8, 24),
    ("Double", "numVirtualLossesPerThread", 0.01, 1000.0), ("Double", "treeReuseCarryOverTimeFactor", 0.0, 1.0),
    ("Double", "overallocateTimeFactor", 0.01, 100.0), ("Double", "midgameTimeFactor", 0.01, 100.0),
    ("Double", "midgameTurnPeakTime", 0.0, 1000.0), ("Double", "endgameTurnTimeDecay", 0.0, 1000.0),
    ("Double", "obviousMovesTimeFactor", 0.01, 1.0), ("Double", "obviousMovesPolicyEntropyTolerance", 0.001, 2.0),
    ("Double", "obviousMovesPolicySurpriseTolerance", 0.001, 2.0), ("Double", "futileVisitsThreshold", 0.01, 1.0),
    ("Profile", "humanSLProfile", None, None),
]  # fmt: skip
# parameters for a human-SL network: an error when the engine runs without one (this sim never has one)
HUMAN_KEYS = [
    "humanSLCpuctExploration", "humanSLCpuctPermanent", "humanSLRootExploreProbWeightless",
    "humanSLRootExploreProbWeightful", "humanSLPlaExploreProbWeightless", "humanSLPlaExploreProbWeightful",
    "humanSLOppExploreProbWeightless", "humanSLOppExploreProbWeightful", "humanSLChosenMoveProp",
    "humanSLChosenMoveIgnorePass", "humanSLChosenMovePiklLambda",
]  # fmt: skip
# SearchParams::failIfParamsDifferOnUnchangeableParameter, with Setup::loadParams' defaults
UNCHANGEABLE = {"nodeTableShardsPowerOfTwo": 16, "useEvalCache": False, "evalCacheMinVisits": 100}
_INT = re.compile(r"[+-]?[0-9]+")
_REAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_RANKS = [f"{n}d" for n in range(9, 0, -1)] + [f"{n}k" for n in range(1, 21)]
_YEAR = re.compile(r"[+-]?[0-9]+")
_ENABLED = {"1", "t", "true", "enabled", "y", "yes", "0", "f", "false", "disabled", "n", "no", "auto"}


class OverrideError(Exception):
    """The text after `Could not set settings: `."""


@dataclass(frozen=True)
class Overridden:
    max_visits: int | None  # the search's maxVisits after the overrides (None: no overrides, as the cfg says)
    unknown: list[str]
    human_sl_profile: bool = False  # a human-SL profile is set (by the overrides or the cfg)


def _text(value: Any) -> str:
    """ConfigParser's value for an override: a string as it is, anything else as nlohmann's dump()."""
    return value if isinstance(value, str) else dump(value)


def human_sl_unused(model: str) -> str:
    """Setup::maybeWarnHumanSLParams' text when a profile is set and the net (`model`, the -model argument)
    takes no human-SL input, which is every net the sim knows."""
    return f"WARNING: humanSLProfile is specified as config param but model(s) don't use it: {model}"


def human_sl_profile(name: str) -> bool:
    """SGFMetadata::getProfile: whether `name` sets a profile (False for "", "_", '""'); raises OverrideError
    for a name it does not know."""
    if name in ("", "_", '""'):
        return False
    if name.startswith("proyear_"):
        year = name[len("proyear_") :].strip(WHITESPACE)  # Global::tryStringToInt: istringstream >> int
        if _YEAR.fullmatch(year) and 1800 <= int(year) <= 2023:
            return True
    for prefix in ("rank_", "preaz_"):
        if name.startswith(prefix):
            ranks = name[len(prefix) :]
            pieces = ranks.split("_")
            if ranks in _RANKS or (len(pieces) == 2 and all(piece in _RANKS for piece in pieces)):
                return True
    raise OverrideError(f"Unknown human SL network profile: {name}")


class _Reader:
    def __init__(self, values: dict[str, str], file_name: str) -> None:
        self.values = values
        self.file_name = file_name
        self.used: set[str] = set()

    def raw(self, key: str) -> str:
        if key not in self.values:
            raise OverrideError(f"Could not find key '{key}' in config file {self.file_name}")
        self.used.add(key)
        return self.values[key]

    def _bad(self, value: str, kind: str, key: str) -> OverrideError:
        return OverrideError(f"Could not parse '{value}' as {kind} for key '{key}' in config file {self.file_name}")

    def _range(self, key: str, lo: str, hi: str) -> OverrideError:
        return OverrideError(f"Key '{key}' must be in the range {lo} to {hi} in config file {self.file_name}")

    def integer(self, key: str, lo: int, hi: int, bits: int) -> int:
        value = self.raw(key)
        s = value.strip(WHITESPACE)
        limit = 1 << (bits - 1)
        if not _INT.fullmatch(s) or not -limit <= int(s) < limit:
            raise self._bad(value, "int" if bits == 32 else "int64_t", key)
        if not lo <= int(s) <= hi:
            raise self._range(key, str(lo), str(hi))
        return int(s)

    def real(self, key: str, lo: float, hi: float, single: bool) -> float:
        value = self.raw(key)
        s = value.strip(WHITESPACE)
        number = float(s) if _REAL.fullmatch(s) else math.inf
        if single:
            number, lo, hi = float32(number), float32(lo), float32(hi)
        if math.isinf(number):  # istringstream fails on overflow too
            raise self._bad(value, "float" if single else "double", key)
        if not lo <= number <= hi:
            raise self._range(key, f"{lo:g}", f"{hi:g}")
        return number

    def boolean(self, key: str) -> bool:
        value = self.raw(key)
        s = ascii_lower(value.strip(WHITESPACE))
        if s not in ("true", "false"):
            raise self._bad(value, "bool", key)
        return s == "true"

    def read(self, kind: str, key: str, lo: Any, hi: Any) -> Any:
        if kind == "Int":
            return self.integer(key, lo, hi, 32)
        if kind == "Int64":
            return self.integer(key, lo, hi, 64)
        if kind in ("Double", "Float"):
            return self.real(key, lo, hi, kind == "Float")
        if kind == "Bool":
            return self.boolean(key)
        if kind == "Enabled":
            value = ascii_lower(self.raw(key)).strip(WHITESPACE)
            if value not in _ENABLED:
                raise OverrideError(
                    f"Could not parse '{value}' as bool or auto for key '{key}' in config file {self.file_name}"
                )
            return value
        if kind == "Player":
            if parse_player(self.raw(key)) is None:
                raise OverrideError(f"Could not parse player in field {key}, should be BLACK or WHITE")
            return None
        return human_sl_profile(self.raw(key))  # Profile


def _load_params(reader: _Reader) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if "numBots" in reader.values and reader.read("Int", "numBots", 1, 4096) != 1:
        raise OverrideError("The config for this command cannot have numBots > 0")
    for kind, key, lo, hi in SEARCH_KEYS[1:]:
        if key == "fpuParentWeightByVisitedPolicyPow" and not params.get("fpuParentWeightByVisitedPolicy", True):
            continue
        if key == "fpuParentWeight" and params.get("fpuParentWeightByVisitedPolicy", True):
            continue
        if key in reader.values or key == "numSearchThreads":  # the one key without a default
            params[key] = reader.read(kind, key, lo, hi)
    for key in HUMAN_KEYS:
        if key in reader.values:
            example = "(e.g -human-model b18c384nbt-humanv0.bin.gz)"
            raise OverrideError(f"Provided parameter {key} but no human model was specified {example}")
    if "reportAnalysisWinratesAs" in reader.values:
        text = reader.raw("reportAnalysisWinratesAs")
        if ascii_lower(text) not in ("b", "black", "w", "white", "sidetomove"):
            raise OverrideError(f"Could not parse config value for reportAnalysisWinratesAs: {text}")
    return params


def apply_overrides(settings: Mapping[str, Any], cfg_values: Mapping[str, str], cfg_name: str) -> Overridden:
    """Check `settings` against the engine's cfg; raises OverrideError as KataGo would refuse them."""
    if not settings:
        return Overridden(None, [])
    values = dict(cfg_values)
    for key in sorted(settings):
        text = _text(settings[key])
        if text:
            values[key] = text
        else:
            values.pop(key, None)
    reader = _Reader(values, f"{cfg_name} and/or command-line and query overrides")
    params = _load_params(reader)
    initial = _load_params(_Reader(dict(cfg_values), cfg_name))
    for key, default in UNCHANGEABLE.items():
        if params.get(key, initial.get(key, default)) != initial.get(key, default):
            raise OverrideError(f"Cannot change {key} after initialization")
    unknown = sorted(key for key in values if key not in cfg_values and key not in reader.used)
    # loadParams starts from SearchParams' defaults: without maxVisits (an empty string deletes it) there is no bound
    return Overridden(params.get("maxVisits", 1 << 50), unknown, bool(params.get("humanSLProfile")))
