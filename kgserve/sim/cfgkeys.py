"""The cfg keys KataGo's analysis engine reads (v1.17: analysis command, search params, NN setup, backends, logging).

A key in a cfg that is not in this set gets KataGo's `Unused key 'X' in FILE` warning at start-up (the engine
still runs, with the default for what the author meant). kgbench reuses `KNOWN_ANALYSIS_KEYS` to refuse a
misspelt key before any engine starts.
"""

from __future__ import annotations

import re

__all__ = ["ALIASES", "KNOWN_ANALYSIS_KEYS", "is_known_key"]

# cfg.applyAlias("numSearchThreadsPerAnalysisThread", "numSearchThreads"): the engine reads the alias
ALIASES = {"numSearchThreadsPerAnalysisThread": "numSearchThreads"}

_LOGGING = {
    "logDir",
    "logFile",
    "logToStderr",
    "logToStdout",
    "logTimeStamp",
    "logConfigContents",
    "logAllRequests",
    "logAllResponses",
    "logSearchInfo",
    "logErrorsAndWarnings",
}
_ANALYSIS = {
    "numAnalysisThreads",
    "numSearchThreadsPerAnalysisThread",
    "numSearchThreads",
    "reportAnalysisWinratesAs",
    "analysisPVLen",
    "analysisIgnorePreRootHistory",
    "ignorePreRootHistory",
    "warnUnusedFields",
    "assumeMultipleStartingBlackMovesAreHandicap",
    "preventCleanupPhase",
    "forDeterministicTesting",
    "maxVisits",
    "maxPlayouts",
    "maxTime",
    "wideRootNoise",
    "homeDataDir",
    "avoidSgfPatternUtility",
    "avoidSgfPatternLambda",
    "avoidSgfPatternMinTurnNumber",
    "avoidSgfPatternMaxFiles",
    "avoidSgfPatternAllowedNames",
    "avoidSgfPatternDirs",
}
_NN = {
    "nnMaxBatchSize",
    "nnCacheSizePowerOfTwo",
    "nnMutexPoolSizePowerOfTwo",
    "nnRandomize",
    "nnRandSeed",
    "numNNServerThreadsPerModel",
    "nnPolicyTemperature",
    "useFP16",
    "useNHWC",
    "deviceToUse",
    "gpuToUse",
    "cudaDeviceToUse",
    "cudaUseFP16",
    "cudaUseNHWC",
    "trtDeviceToUse",
    "trtUseFP16",
    "trtTransformerNHWC",
    "openclDeviceToUse",
    "openclUseFP16",
    "openclUseNHWC",
    "openclReTunePerBoardSize",
    "openclDefaultToNHWC",
    "numEigenThreadsPerModel",
    "metalDeviceToUse",
    "metalUseFP16",
    "metalUseNHWC",
    "humanSLProfile",
    "humanSLCpuctExploration",
    "humanSLCpuctPermanent",
    "humanSLRootExploreProbWeightless",
    "humanSLRootExploreProbWeightful",
    "humanSLPlaExploreProbWeightless",
    "humanSLPlaExploreProbWeightful",
    "humanSLOppExploreProbWeightless",
    "humanSLOppExploreProbWeightful",
    "humanSLChosenMoveProp",
    "humanSLChosenMoveIgnorePass",
    "humanSLChosenMovePiklLambda",
}
_SEARCH = {
    "useGraphSearch",
    "rootSymmetryPruning",
    "cpuctExploration",
    "cpuctExplorationLog",
    "cpuctExplorationBase",
    "cpuctUtilityStdevPrior",
    "cpuctUtilityStdevPriorWeight",
    "cpuctUtilityStdevScale",
    "fpuReductionMax",
    "rootFpuReductionMax",
    "fpuLossProp",
    "rootFpuLossProp",
    "fpuParentWeight",
    "fpuParentWeightByVisitedPolicy",
    "fpuParentWeightByVisitedPolicyPow",
    "subtreeValueBiasFactor",
    "subtreeValueBiasFreeProp",
    "subtreeValueBiasTableNumShards",
    "subtreeValueBiasWeightExponent",
    "useLcbForSelection",
    "lcbStdevs",
    "minVisitPropForLCB",
    "useNonBuggyLcb",
    "useUncertainty",
    "uncertaintyCoeff",
    "uncertaintyExponent",
    "uncertaintyMaxWeight",
    "rootNoiseEnabled",
    "rootDirichletNoiseTotalConcentration",
    "rootDirichletNoiseWeight",
    "rootPolicyTemperature",
    "rootPolicyTemperatureEarly",
    "rootDesiredPerChildVisitsCoeff",
    "rootNumSymmetriesToSample",
    "winLossUtilityFactor",
    "staticScoreUtilityFactor",
    "dynamicScoreUtilityFactor",
    "dynamicScoreCenterZeroWeight",
    "dynamicScoreCenterScale",
    "noResultUtilityForWhite",
    "drawEquivalentWinsForWhite",
    "playoutDoublingAdvantage",
    "playoutDoublingAdvantagePla",
    "conservativePass",
    "antiMirror",
    "searchFactorAfterOnePass",
    "searchFactorAfterTwoPass",
    "chosenMoveTemperature",
    "chosenMoveTemperatureEarly",
    "chosenMoveTemperatureHalflife",
    "chosenMoveTemperatureOnlyBelowProb",
    "chosenMoveSubtract",
    "chosenMovePrune",
    "valueWeightExponent",
    "useNoisePruning",
    "noisePruneUtilityScale",
    "noisePruningCap",
    "useEvalCache",
    "evalCacheMinVisits",
    "nodeTableShardsPowerOfTwo",
    "numVirtualLossesPerThread",
    "treeReuseCarryOverTimeFactor",
    "overallocateTimeFactor",
    "midgameTimeFactor",
    "midgameTurnPeakTime",
    "endgameTurnTimeDecay",
    "obviousMovesTimeFactor",
    "obviousMovesPolicyEntropyTolerance",
    "obviousMovesPolicySurpriseTolerance",
    "futileVisitsThreshold",
    "enablePassingHacks",
    "enableMorePassingHacks",
    "graphSearchRepBound",
    "graphSearchCatchUpLeakProb",
    "ignoreAllHistory",
    "fillDameBeforePass",
    "wideRootNoiseBase",
}

KNOWN_ANALYSIS_KEYS: frozenset[str] = frozenset(_LOGGING | _ANALYSIS | _NN | _SEARCH)

# per-GPU-thread and per-bot variants: cudaDeviceToUseThread1, cudaUseFP16-1, maxVisits0 ...
_INDEXED = re.compile(
    r"^(?:(?:cuda|trt|opencl|metal)DeviceToUseThread\d+|(?:cuda|trt|opencl|metal)UseFP16-\d+"
    r"|(?:cuda|trt|opencl|metal)UseNHWC-\d+|deviceToUseThread\d+|gpuToUseThread\d+)$"
)


def is_known_key(key: str) -> bool:
    return key in KNOWN_ANALYSIS_KEYS or _INDEXED.match(key) is not None
