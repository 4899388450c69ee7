"""kgserve.katago_cfg: which keys KataGo's analysis engine reads, and reading / writing cfg text.

The key sets are checked against KataGo v1.17.2 itself: its recorded `Unused key` warning (tests/data) and,
when KGBENCH_KATAGO_BIN and KGBENCH_KATAGO_MODEL name a real KataGo, a live start-up with a cfg that mixes
keys it reads and keys it does not.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from pathlib import Path

import pytest

from kgserve.katago_cfg import (
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

REF = Path(__file__).resolve().parent / "data" / "katago-reference"
_UNUSED = re.compile(r"Unused key '([^']+)'")

# keys the analysis engine reads (some from each part of the source) and keys it does not (GTP-only keys,
# names from other KataGo versions, a typo, a per-bot index the analysis engine does not use)
LIVE_CFG = {
    "numAnalysisThreads": 2,
    "numSearchThreadsPerAnalysisThread": 1,
    "maxVisits": 16,
    "nnMaxBatchSize": 8,
    "nnCacheSizePowerOfTwo": 16,
    "reportAnalysisWinratesAs": "BLACK",
    "logToStderr": False,
    "warnUnusedFields": True,
    "rootPruneUselessMoves": False,
    "policyOptimism": 0.0,
    "minPlayoutsPerThread": 0,
    "nnRandSeed0": "abc",
    "cudaUseFP16": True,  # another backend's key: marked used by every build
    "useNHWC": False,
    "analysisIgnorePreRootHistory": False,
    "wideRootNoiseBase": 0.0,
    "graphSearchCatchUpProp": 0.05,
    "maxVisits0": 50,
    "komi": 7.5,
    "nnMaxBatchSze": 32,
}


def test_the_recorded_unused_key_warning_names_exactly_the_unknown_keys() -> None:
    log = (REF / "protocol" / "startup_unused_cfg_key.stderr.log").read_text()
    echo = log.split("Running with following config:\n", 1)[1].split("\n\n", 1)[0]
    keys = parse_cfg_text(echo)
    assert {k for k in keys if not is_known_key(k)} == set(_UNUSED.findall(log)) == {"nnMaxBatchSze"}


def test_the_reference_cfgs_use_only_known_keys() -> None:
    for cfg in (REF / "analysis.cfg",):
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
    assert parse_cfg_text("a = 1 # c\n# x\n\nb=two\na = 3\n") == {"a": "3", "b": "two"}
    with pytest.raises(CfgParseError, match="not a key"):
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


@pytest.mark.slow
def test_a_real_katago_warns_about_exactly_the_keys_it_does_not_read(tmp_path: Path) -> None:
    binary, model = os.environ.get("KGBENCH_KATAGO_BIN"), os.environ.get("KGBENCH_KATAGO_MODEL")
    if not binary or not model:
        pytest.skip("set KGBENCH_KATAGO_BIN and KGBENCH_KATAGO_MODEL to run against a real KataGo")
    cfg = tmp_path / "live.cfg"
    cfg.write_text(cfg_text(LIVE_CFG))
    proc = subprocess.Popen(
        [binary, "analysis", "-config", str(cfg), "-model", model],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "ready to begin handling requests" in line:
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert ready.wait(120), "".join(lines[-20:])
        assert proc.stdin is not None
        proc.stdin.close()  # end of input: the engine exits
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        reader.join(10)
        for pipe in (proc.stdin, proc.stderr):
            if pipe is not None and not pipe.closed:
                pipe.close()
    warned = set(_UNUSED.findall("".join(lines)))
    assert warned == {k for k in LIVE_CFG if not is_known_key(k)}
    assert warned == {
        "useNHWC",
        "analysisIgnorePreRootHistory",
        "wideRootNoiseBase",
        "graphSearchCatchUpProp",
        "maxVisits0",
        "komi",
        "nnMaxBatchSze",
    }
