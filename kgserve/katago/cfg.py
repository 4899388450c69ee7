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
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "ALIASES",
    "ANALYSIS_ONLY_KEYS",
    "BACKEND_PREFIXES",
    "GTP_ONLY_KEYS",
    "KATAGO_SOURCE_VERSION",
    "KATAGO_WHITESPACE",
    "KNOWN_ANALYSIS_KEYS",
    "LINE_BREAKS",
    "CfgParseError",
    "cfg_analysis_threads",
    "cfg_max_visits",
    "cfg_text",
    "format_value",
    "is_known_key",
    "parse_cfg_text",
    "read_cfg",
    "value_problem",
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


# Global::trim / Global::isWhitespace in cpp/core/global.cpp: the only whitespace KataGo's cfg parser strips
KATAGO_WHITESPACE = " \t\r\n\v\f"

# Every character a line reader of KataGo or of this project splits a line on: KataGo's `getline` splits on `\n`
# only, Python's `str.splitlines` (what kgserve read cfgs with before, and what any other Python reader would use)
# also on CR, VT, FF, FS, GS, RS, NEL, U+2028 and U+2029. A value holding any of them would be one line to KataGo
# and several to such a reader, so a written value refuses them all and the reader here splits on `\n` only.
LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")

# ConfigParser::parseKeyValue: a key is ASCII letters, digits, `_` and `-`
_KEY = re.compile(r"[A-Za-z0-9_-]+")


class CfgParseError(ValueError):
    """A cfg KataGo refuses to load (the message is KataGo's ConfigParsingError text, line and file named)."""


@dataclass
class _Reader:
    """ConfigParser::readStreamContent and processIncludedFile of KataGo v1.17.2 (cpp/core/config_parser.cpp),
    as the analysis command builds it (`keysOverride` false: a key twice in one file is an error;
    `keysOverrideFromIncludes` true: a key set again by an included file, or after one, overrides)."""

    file_name: str
    base_dirs: list[str] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)
    included: list[str] = field(default_factory=list)
    overrides: list[str] = field(default_factory=list)  # KataGo's "was overriden" log lines
    cur_file: str = ""
    line_num: int = 0

    def where(self) -> str:
        return f", line {self.line_num} in '{self.cur_file}'"

    def fail(self, what: str = "Could not parse key value pair") -> CfgParseError:
        return CfgParseError(what + self.where())

    def read_text(self, text: str) -> None:
        self.line_num = 0
        file_keys: set[str] = set()
        for raw in text.split("\n"):  # std::getline: `\n` and nothing else ends a line
            self.line_num += 1
            line = raw.strip(KATAGO_WHITESPACE)
            if not line or line[0] == "#":
                continue
            if line[0] == "@":
                self.directive(line)
                continue
            pair = self.key_value(line)
            if pair is None:
                continue
            key, value = pair
            if key in file_keys:
                raise CfgParseError(
                    f"Key '{key}' + was specified multiple times in {self.cur_file}, you probably didn't mean to do "
                    "this, please delete one of them"
                )
            if key in self.values:
                self.overrides.append(f"Key '{key}' + was overriden by new value '{value}'{self.where()}")
            self.values[key] = value
            file_keys.add(key)

    def directive(self, line: str) -> None:
        line = line.split("#", 1)[0]
        if len(line) < 9:
            raise self.fail("Unsupported @ directive")
        cut = next((i for i, c in enumerate(line) if c in " \t\v\f="), None)
        if cut is None:
            raise self.fail("@ directive without value (key-val separator is not found)")
        key = line[:cut].strip(KATAGO_WHITESPACE)
        if key != "@include":
            raise self.fail(f"Unsupported @ directive '{key}'")
        rest = line[cut + 1 :].lstrip(" \t\v\f=")
        if not rest:
            raise self.fail("@ directive without value (value after key-val separator is not found)")
        name = rest.strip(KATAGO_WHITESPACE).strip("'").strip('"')
        line_num, cur_file = self.line_num, self.cur_file
        self.include(name)
        self.line_num, self.cur_file = line_num, cur_file

    def include(self, name: str) -> None:
        if name == self.file_name or name in self.included:
            raise self.fail(f"Circular or multiple inclusion of the same file: '{name}'")
        self.included.append(name)
        self.cur_file = name
        base = _base_dir(name)
        if base and base[0] in "\\/":
            raise CfgParseError("Absolute paths in the included files are not supported yet")
        path = "".join(self.base_dirs) + name
        if base:
            self.base_dirs.append(base)
        try:
            text = Path(path).read_bytes().decode("utf-8", errors="replace")
        except OSError:
            raise CfgParseError(f"Could not open file {path}") from None
        self.read_text(text)
        if base:
            self.base_dirs.pop()

    def key_value(self, line: str) -> tuple[str, str] | None:
        """ConfigParser::parseKeyValue on a trimmed line: None for a comment, else (key, value)."""
        n, i = len(line), 0
        match = _KEY.match(line)
        key = match.group() if match else ""
        i = len(key)
        if i < n and line[i] == "#":
            if key:
                raise self.fail()
            return None
        if i < n and line[i] not in KATAGO_WHITESPACE and line[i] != "=":
            raise self.fail()
        while i < n and line[i] in KATAGO_WHITESPACE:
            i += 1
        if i < n and line[i] == "#":
            if key:
                raise self.fail()
            return None
        if i < n and line[i] != "=":
            raise self.fail()
        found_equals = i < n
        i += 1 if found_equals else 0
        while i < n and line[i] in KATAGO_WHITESPACE:
            i += 1
        if i < n and line[i] == "#":
            if key or found_equals:
                raise self.fail()
            return None
        quoted = i < n and line[i] == '"'
        value = self.quoted_value(line, i + 1) if quoted else line[i:].split("#", 1)[0].strip(KATAGO_WHITESPACE)
        if (quoted or found_equals) and not (key and value):
            raise self.fail()
        if bool(key) != bool(value):
            raise self.fail()
        return (key, value) if key else None

    def quoted_value(self, line: str, i: int) -> str:
        """A `"..."` value: `\\x` is x, the closing quote may be followed only by whitespace and a comment."""
        out: list[str] = []
        n = len(line)
        while i < n:
            c = line[i]
            if c == "\\":
                if i + 1 >= n:
                    raise self.fail()
                out.append(line[i + 1])
                i += 2
                continue
            if c == '"':
                break
            out.append(c)
            i += 1
        if i >= n:  # no closing quote
            raise self.fail()
        rest = line[i + 1 :].strip(KATAGO_WHITESPACE)
        if rest and rest[0] != "#":
            raise self.fail()
        return "".join(out)


def _base_dir(name: str) -> str:
    """ConfigParser::extractBaseDir: the path up to and including its last `/` or `\\`."""
    cut = max(name.rfind("/"), name.rfind("\\"))
    return name[: cut + 1] if cut >= 0 else ""


def parse_cfg_text(text: str, file_name: str = "<cfg text>") -> dict[str, str]:
    """The keys of cfg text exactly as KataGo v1.17.2 reads them (lines split on `\n` only, `#` comments,
    `key = value` or `key = "quoted"`, KataGo's whitespace trimmed, a key twice refused, `@include` read relative
    to the working folder as KataGo reads a stream). CfgParseError with KataGo's message for what it refuses."""
    reader = _Reader(file_name=file_name, cur_file=file_name)
    reader.read_text(text)
    return reader.values


def read_cfg(path: Path) -> dict[str, str]:
    """A cfg file's keys as KataGo reads them, `@include`s relative to its folder (OSError when it cannot be read,
    CfgParseError for what KataGo refuses). Bytes that are not UTF-8 read as U+FFFD: KataGo splits bytes on
    `\n`, which no multi-byte UTF-8 sequence holds, so the lines are the same."""
    name = str(path)
    text = Path(path).read_bytes().decode("utf-8", errors="replace")
    base = _base_dir(name)
    reader = _Reader(file_name=name, cur_file=name, base_dirs=[base] if base else [])
    reader.read_text(text)
    return reader.values


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


def value_problem(text: str) -> str | None:
    """Why KataGo would not read `text` back as written as an unquoted `key = text` value, or None. A line break of
    any reader (LINE_BREAKS), a `#` (starts a comment), an empty value or one with KataGo's whitespace at either end
    (trimmed), or a leading `"` (starts a quoted value) would each make what KataGo, or a reader of this project,
    reads differ from what was meant."""
    breaks = sorted({f"U+{ord(c):04X}" for c in text if c in LINE_BREAKS})
    if breaks:
        return f"it holds a line break ({', '.join(breaks)})"
    if "#" in text:
        return "it holds a '#', which starts a comment"
    if not text:
        return "it is empty (KataGo refuses a key without a value)"
    if text != text.strip(KATAGO_WHITESPACE):
        return "it starts or ends with whitespace, which KataGo trims"
    if text.startswith('"'):
        return "it starts with '\"', which KataGo reads as a quoted value"
    return None


def cfg_text(keys: Mapping[str, object], header: Iterable[str] = ()) -> str:
    """The cfg file: `# header` lines, then `key = value` in the given order. ValueError for a key or a value KataGo
    cannot read back as written (`value_problem`), or a header line holding a line break."""
    lines = []
    for line in header:
        if any(c in LINE_BREAKS for c in line):
            raise ValueError(f"cfg header line {line!r} holds a line break")
        lines.append(f"# {line}")
    for key, value in keys.items():
        if _KEY.fullmatch(key) is None:
            raise ValueError(f"KataGo key {key!r} cannot be written: a key is ASCII letters, digits, '_' and '-'")
        text = format_value(value)
        problem = value_problem(text)
        if problem:
            raise ValueError(f"KataGo key {key!r} has a value KataGo cannot read back as written: {text!r}: {problem}")
        lines.append(f"{key} = {text}")
    return "\n".join(lines) + "\n"
