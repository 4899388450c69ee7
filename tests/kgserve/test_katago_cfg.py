"""kgserve.katago.cfg: which keys KataGo's analysis engine reads, and reading / writing cfg text.

The key sets are checked here against KataGo v1.17.2's recorded `Unused key` warning (tests/data), and in the
real-KataGo tier (tests/katago/test_cfg_keys.py) against a live start-up.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kgserve.katago.cfg import (
    ALIASES,
    ANALYSIS_ONLY_KEYS,
    GTP_ONLY_KEYS,
    KNOWN_ANALYSIS_KEYS,
    CfgParseError,
    cfg_text,
    format_value,
    is_known_key,
    parse_cfg_text,
    read_cfg,
)
from tests.conftest import REFERENCE

_UNUSED = re.compile(r"Unused key '([^']+)'")


def test_the_recorded_unused_key_warning_names_exactly_the_unknown_keys() -> None:
    log = (REFERENCE / "protocol" / "startup_unused_cfg_key.stderr.log").read_text()
    echo = log.split("Running with following config:\n", 1)[1].split("\n\n", 1)[0]
    keys = parse_cfg_text(echo)
    assert {k for k in keys if not is_known_key(k)} == set(_UNUSED.findall(log)) == {"nnMaxBatchSze"}


def test_the_reference_cfgs_use_only_known_keys() -> None:
    for cfg in (REFERENCE / "analysis.cfg",):
        assert [k for k in read_cfg(cfg) if not is_known_key(k)] == []


def test_key_sets() -> None:
    assert ANALYSIS_ONLY_KEYS <= KNOWN_ANALYSIS_KEYS and not GTP_ONLY_KEYS & KNOWN_ANALYSIS_KEYS
    assert {"numAnalysisThreads", "numSearchThreadsPerAnalysisThread"} <= ANALYSIS_ONLY_KEYS
    assert {"komi", "ponderingEnabled", "analysisIgnorePreRootHistory"} <= GTP_ONLY_KEYS
    assert ALIASES == {"numSearchThreadsPerAnalysisThread": "numSearchThreads"}
    for key in (
        "cudaDeviceToUseThread3",
        "gpuToUseModel0Thread2",
        "trtUseFP16-0",
        "nnRandSeed1",
        "avoidSgf2PatternDirs",
    ):
        assert is_known_key(key), key
    for key in ("nnMaxBatchSze", "maxVisits0", "useNHWC", "cudaDeviceToUseThreadX", "trtUseFP16-x"):
        assert not is_known_key(key), key


def test_parse_and_write_round_trip() -> None:
    assert parse_cfg_text("a = 1 # c\n# x\n\nb=two\n") == {"a": "1", "b": "two"}
    with pytest.raises(CfgParseError, match="Could not parse key value pair, line 2"):
        parse_cfg_text("ok = 1\nnot a key value line\n")
    assert format_value(True) == "true" and format_value([0, 1]) == "0,1" and format_value(("x", False)) == "x,false"
    text = cfg_text({"nnMaxBatchSize": 64, "cudaUseFP16": True, "cudaDeviceToUse": [0, 1]}, ["made by a test"])
    assert text == "# made by a test\nnnMaxBatchSize = 64\ncudaUseFP16 = true\ncudaDeviceToUse = 0,1\n"
    assert parse_cfg_text(text) == {"nnMaxBatchSize": "64", "cudaUseFP16": "true", "cudaDeviceToUse": "0,1"}
    for bad in ("a # b", "two\nlines"):
        with pytest.raises(ValueError, match="cannot read"):
            cfg_text({"logDir": bad})


def test_read_cfg_errors(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        read_cfg(tmp_path / "missing.cfg")
