"""KataGo cfg files: the keys KataGo reads, and reading and writing `key = value` cfg text.

The one place that knows KataGo's cfg format. kgbench renders job cfgs and `katago benchmark` cfgs with it
and refuses a key KataGo would not read; the engine pool reads `maxVisits` with it; the simulated engine
reads its cfg and warns `Unused key` with it.

Versions: the key sets below were extracted from the C++ source of KataGo v1.17.2 (the release of the CPU
build and of the reference transcripts in tests/data/katago-reference): `cpp/command/analysis.cpp`,
`cpp/core/logger.cpp`, the `Setup::` functions the analysis command calls (`cpp/program/setup.cpp`) and
`cpp/neuralnet/*backend.cpp`. The GPU builds served in production are pinned to v1.18.1 (runtime/config.yaml),
whose source was not available to check: a key that v1.18 added is not known here, so kgbench refuses it
until it is added to these sets (KataGo itself would only warn `Unused key` and run with its default).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = [
    "ALIASES",
    "ANALYSIS_ONLY_KEYS",
    "BACKEND_PREFIXES",
    "GTP_ONLY_KEYS",
    "KATAGO_SOURCE_VERSION",
    "KNOWN_ANALYSIS_KEYS",
    "CfgParseError",
    "cfg_analysis_threads",
    "cfg_max_visits",
    "cfg_text",
    "format_value",
    "is_known_key",
    "parse_cfg_text",
    "read_cfg",
]

KATAGO_SOURCE_VERSION = "1.17.2"  # the KataGo source the key sets were checked against (see above)

# cfg.applyAlias("numSearchThreadsPerAnalysisThread", "numSearchThreads"): the analysis engine reads the alias
ALIASES = {"numSearchThreadsPerAnalysisThread": "numSearchThreads"}

# Setup::getBackendPrefixes(): keys of the backends a build was not compiled for are marked used (no warning)
BACKEND_PREFIXES = ("cuda", "trt", "metal", "opencl", "eigen")

# cpp/command/analysis.cpp
_ANALYSIS_COMMAND = frozenset(
    {
        "analysisPVLen",
        "assumeMultipleStartingBlackMovesAreHandicap",
        "conservativePass",
        "forDeterministicTesting",
        "humanSLProfile",
        "logAllRequests",
        "logAllResponses",
        "logErrorsAndWarnings",
        "logSearchInfo",
        "numAnalysisThreads",
        "numSearchThreadsPerAnalysisThread",
        "preventCleanupPhase",
        "warnUnusedFields",
    }
)
# cpp/core/logger.cpp
_LOGGING = frozenset(
    {
        "logConfigContents",
        "logDir",
        "logDirDated",
        "logFile",
        "logTimeStamp",
        "logToStderr",
        "logToStdout",
    }
)
# Setup::loadParams (search parameters; lines commented out in the source are not read)
_SEARCH = frozenset(
    {
        "alwaysComputePassAliveUnderSuicideRules",
        "antiMirror",
        "avoidRepeatedPatternUtility",
        "chosenMovePrune",
        "chosenMoveSubtract",
        "chosenMoveTemperature",
        "chosenMoveTemperatureEarly",
        "chosenMoveTemperatureHalflife",
        "chosenMoveTemperatureOnlyBelowProb",
        "cpuctExploration",
        "cpuctExplorationBase",
        "cpuctExplorationLog",
        "cpuctUtilityStdevPrior",
        "cpuctUtilityStdevPriorWeight",
        "cpuctUtilityStdevScale",
        "drawEquivalentWinsForWhite",
        "dynamicScoreCenterScale",
        "dynamicScoreCenterZeroWeight",
        "dynamicScoreUtilityFactor",
        "enableMorePassingHacks",
        "enablePassingHacks",
        "endgameTurnTimeDecay",
        "evalCacheMinVisits",
        "fillDameBeforePass",
        "fpuLossProp",
        "fpuParentWeight",
        "fpuParentWeightByVisitedPolicy",
        "fpuParentWeightByVisitedPolicyPow",
        "fpuReductionMax",
        "futileVisitsThreshold",
        "graphSearchCatchUpLeakProb",
        "graphSearchRepBound",
        "humanSLChosenMoveIgnorePass",
        "humanSLChosenMovePiklLambda",
        "humanSLChosenMoveProp",
        "humanSLCpuctExploration",
        "humanSLCpuctPermanent",
        "humanSLOppExploreProbWeightful",
        "humanSLOppExploreProbWeightless",
        "humanSLPlaExploreProbWeightful",
        "humanSLPlaExploreProbWeightless",
        "humanSLRootExploreProbWeightful",
        "humanSLRootExploreProbWeightless",
        "ignoreAllHistory",
        "ignorePreRootHistory",
        "lagBuffer",
        "lcbStdevs",
        "maxPlayouts",
        "maxPlayoutsPondering",
        "maxTime",
        "maxTimePondering",
        "maxVisits",
        "maxVisitsPondering",
        "midgameTimeFactor",
        "midgameTurnPeakTime",
        "minPlayoutsPerThread",
        "minVisitPropForLCB",
        "nnPolicyTemperature",
        "noResultUtilityForWhite",
        "nodeTableShardsPowerOfTwo",
        "noisePruneUtilityScale",
        "noisePruningCap",
        "numBots",
        "numSearchThreads",
        "numVirtualLossesPerThread",
        "obviousMovesPolicyEntropyTolerance",
        "obviousMovesPolicySurpriseTolerance",
        "obviousMovesTimeFactor",
        "overallocateTimeFactor",
        "playoutDoublingAdvantage",
        "playoutDoublingAdvantagePla",
        "policyOptimism",
        "rootDesiredPerChildVisitsCoeff",
        "rootDirichletNoiseTotalConcentration",
        "rootDirichletNoiseWeight",
        "rootEndingBonusPoints",
        "rootFpuLossProp",
        "rootFpuReductionMax",
        "rootNoiseEnabled",
        "rootNumSymmetriesToSample",
        "rootPolicyOptimism",
        "rootPolicyTemperature",
        "rootPolicyTemperatureEarly",
        "rootPruneUselessMoves",
        "rootSymmetryPruning",
        "searchFactorAfterOnePass",
        "searchFactorAfterTwoPass",
        "staticScoreUtilityFactor",
        "subtreeValueBiasFactor",
        "subtreeValueBiasFreeProp",
        "subtreeValueBiasWeightExponent",
        "treeReuseCarryOverTimeFactor",
        "uncertaintyCoeff",
        "uncertaintyExponent",
        "uncertaintyMaxWeight",
        "useEvalCache",
        "useGraphSearch",
        "useLcbForSelection",
        "useNoisePruning",
        "useNonBuggyLcb",
        "useUncertainty",
        "valueWeightExponent",
        "wideRootNoise",
        "winLossUtilityFactor",
    }
)
# Setup::initializeNNEvaluators and cpp/neuralnet/*backend.cpp
_NN = frozenset(
    {
        "cudaDeviceToUse",
        "cudaDisableGraphSDPA",
        "cudaDisableWarmup",
        "cudaGpuToUse",
        "cudaInputsUseNHWC",
        "cudaUse1x1Matmul",
        "cudaUseFP16",
        "cudaUseNHWC",
        "debugSkipNeuralNet",
        "deviceToUse",
        "eigenDeviceToUse",
        "eigenGpuToUse",
        "eigenInputsUseNHWC",
        "eigenUseFP16",
        "gpuToUse",
        "inputsUseNHWC",
        "maxBoardSizeForNNBuffer",
        "maxBoardXSizeForNNBuffer",
        "maxBoardYSizeForNNBuffer",
        "metalDeviceToUse",
        "metalGpuToUse",
        "metalInputsUseNHWC",
        "metalUseFP16",
        "nnCacheSizePowerOfTwo",
        "nnForcedSymmetry",
        "nnMaxBatchSize",
        "nnMutexPoolSizePowerOfTwo",
        "nnRandSeed",
        "nnRandomize",
        "numEigenThreadsPerModel",
        "numNNServerThreadsPerModel",
        "openclDeviceToUse",
        "openclGpuToUse",
        "openclInputsUseNHWC",
        "openclReTunePerBoardSize",
        "openclTunerFile",
        "openclUseFP16",
        "requireMaxBoardSize",
        "trtDeviceToUse",
        "trtDisableOnnx",
        "trtDumpDebugPlanToDir",
        "trtGpuToUse",
        "trtInputsUseNHWC",
        "trtTransformerNHWC",
        "trtUseFP16",
        "useFP16",
    }
)
# other Setup:: functions the analysis command calls
_OTHER_SETUP = frozenset(
    {
        "avoidSgfPatternAllowedNames",
        "avoidSgfPatternDirs",
        "avoidSgfPatternLambda",
        "avoidSgfPatternMaxFiles",
        "avoidSgfPatternMinTurnNumber",
        "avoidSgfPatternUtility",
        "homeDataDir",
        "reportAnalysisWinratesAs",
    }
)

KNOWN_ANALYSIS_KEYS: frozenset[str] = _ANALYSIS_COMMAND | _LOGGING | _SEARCH | _NN | _OTHER_SETUP

# read by `katago analysis`, not by `katago gtp` (nor the GTP-style `katago benchmark`)
ANALYSIS_ONLY_KEYS: frozenset[str] = frozenset(
    {
        "logAllRequests",
        "logAllResponses",
        "logErrorsAndWarnings",
        "numAnalysisThreads",
        "numSearchThreadsPerAnalysisThread",
        "warnUnusedFields",
    }
)

# read by `katago gtp` (cpp/command/gtp.cpp and the Setup:: functions it calls), not by `katago analysis`
GTP_ONLY_KEYS: frozenset[str] = frozenset(
    {
        "allowResignation",
        "analysisIgnorePreRootHistory",
        "analysisWideRootNoise",
        "autoAvoidRepeatDir",
        "autoAvoidRepeatSaveChunkSize",
        "cleanupBeforePass",
        "defaultBoardSize",
        "defaultBoardXSize",
        "defaultBoardYSize",
        "delayMoveMax",
        "delayMoveScale",
        "dynamicPlayoutDoublingAdvantageCapPerOppLead",
        "friendlyPass",
        "friendlyPassOk",
        "genmoveAntiMirror",
        "gtpForceMaxNNSize",
        "hasButton",
        "ignoreGTPAndForceKomi",
        "koRule",
        "komi",
        "logAllGTPCommunication",
        "logSearchInfoForChosenMove",
        "multiStoneSuicideLegal",
        "ogsChatToStderr",
        "ponderingEnabled",
        "resignConsecTurns",
        "resignMinMovesPerBoardArea",
        "resignMinScoreDifference",
        "resignThreshold",
        "rules",
        "scoringRule",
        "searchFactorWhenWinning",
        "searchFactorWhenWinningThreshold",
        "searchRandSeed",
        "startupPrintMessageToStderr",
        "taxRule",
        "whiteBonusPerHandicapStone",
        "whiteHandicapBonus",
    }
)

_BACKEND = "(?:" + "|".join(BACKEND_PREFIXES) + ")"
# Indexed variants the analysis engine also reads: per-model (index 0: the main model, 1: the human model) and
# per-server-thread devices (`cudaDeviceToUseThread1`, `gpuToUseModel0Thread2`), per-model FP16 / NHWC / board
# size / seed (`trtUseFP16-0`, `nnRandSeed0`), extra avoid-pattern sets (`avoidSgf2PatternDirs`). Per-bot search
# params (`maxVisits0`) are not among them: the analysis engine loads a single bot's params without an index.
_INDEXED = re.compile(
    rf"^(?:(?:{_BACKEND}(?:Device|Gpu)|device|gpu)ToUse(?:Model\d+)?(?:Thread\d+)?"
    rf"|(?:{_BACKEND}UseFP16|useFP16)-\d+"
    rf"|(?:{_BACKEND}InputsUseNHWC|inputsUseNHWC)\d+"
    r"|(?:maxBoard[XY]?SizeForNNBuffer|requireMaxBoardSize|nnRandSeed)\d+"
    r"|avoidSgf\d*Pattern(?:Utility|Lambda|MinTurnNumber|MaxFiles|AllowedNames|Dirs)\d*)$"
)


def is_known_key(key: str) -> bool:
    """True when `katago analysis` reads `key` (so it does not warn `Unused key` about it)."""
    return key in KNOWN_ANALYSIS_KEYS or _INDEXED.match(key) is not None


class CfgParseError(ValueError):
    """A line that is neither blank, a `#` comment nor `key = value` (KataGo refuses the whole file)."""


def parse_cfg_text(text: str) -> dict[str, str]:
    """`key = value` lines (`#` starts a comment, blank lines skipped, later keys win), values as written."""
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if "=" not in line:
            raise CfgParseError(raw)
        key, value = (part.strip() for part in line.split("=", 1))
        values[key] = value
    return values


def read_cfg(path: Path) -> dict[str, str]:
    """A cfg file's keys (OSError when it cannot be read, CfgParseError when a line is not `key = value`)."""
    return parse_cfg_text(path.read_text(encoding="utf-8", errors="replace"))


def cfg_max_visits(cfg: Path) -> int | None:
    """The `maxVisits` of a KataGo cfg (what a query without maxVisits searches), if the file says."""
    try:
        return int(read_cfg(cfg)["maxVisits"])
    except (OSError, CfgParseError, KeyError, ValueError):  # unreadable, no maxVisits, or not a number
        return None


def cfg_analysis_threads(cfg: Path) -> int | None:
    """The `numAnalysisThreads` of a KataGo cfg (how many turns it searches at once), if the file says."""
    try:
        return int(read_cfg(cfg)["numAnalysisThreads"])
    except (OSError, CfgParseError, KeyError, ValueError):  # unreadable, not set, or not a number
        return None


def format_value(value: object) -> str:
    """A value as KataGo reads it: booleans `true`/`false`, lists comma-separated (`cudaDeviceToUse = 0,1`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(format_value(v) for v in value)
    return str(value)


def cfg_text(keys: Mapping[str, object], header: Iterable[str] = ()) -> str:
    """The cfg file: `# header` lines, then `key = value` in the given order. ValueError for a value KataGo
    cannot read back (a newline or a `#`, which would start a comment)."""
    lines = [f"# {line}" for line in header]
    for key, value in keys.items():
        text = format_value(value)
        if "\n" in text or "#" in text:
            raise ValueError(f"KataGo key {key!r} has a value KataGo cannot read: {text!r}")
        lines.append(f"{key} = {text}")
    return "\n".join(lines) + "\n"
