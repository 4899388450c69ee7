"""kgserve.katago.cfg's key sets against a real KataGo: started with a cfg that mixes keys it reads and keys it
does not, it warns `Unused key` for exactly the keys `is_known_key` rejects."""

from __future__ import annotations

import re
import subprocess
import threading
from pathlib import Path

import pytest

from kgserve.katago.cfg import cfg_text, is_known_key
from tests.katago.conftest import RealKatago

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


@pytest.mark.katago
def test_a_real_katago_warns_about_exactly_the_keys_it_does_not_read(tmp_path: Path, real_katago: RealKatago) -> None:
    cfg = tmp_path / "live.cfg"
    cfg.write_text(cfg_text(LIVE_CFG))
    proc = subprocess.Popen(
        [str(real_katago.binary), "analysis", "-config", str(cfg), "-model", str(real_katago.model)],
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
