"""benchmarks.device_compare and benchmarks/gpu_h200.sh: a device run's line beside the sim's profiles and the H100."""

from __future__ import annotations

import subprocess
from pathlib import Path

from benchmarks.device_compare import main
from tests.conftest import REPO

H100 = REPO / "docs" / "data" / "gpu-h100-2026-11-25"
REHEARSAL = REPO / "docs" / "data" / "issue34" / "rehearsal-2026-11-27"


def test_the_h100_qualifications_read_against_their_fitted_profiles(tmp_path: Path) -> None:
    out = tmp_path / "compare.md"
    results = [H100 / "qualify-b40c768nbt" / "results.json", H100 / "qualify-katrain" / "results.json"]
    assert main([*map(str, results), "--out", str(out)]) == 0
    text = out.read_text()
    assert "the sim's profile h100-b40c768nbt" in text and "the sim's profile h100-b10c384h6nbttflrs" in text
    # b40 at batch 128: 21.5 measured, the H100 column the same run; KaTrain at 128: 69.8 against the fit's 70.3
    assert "| nnMaxBatchSize=128 | FINISHED | 21.5 | 2,655 | 0.61 | 21.29 | gpu | 19.9 | 1.08 | 21.5 |" in text
    assert "| nnMaxBatchSize=128 | FINISHED | 69.8 | 6,507 | 0.09 | 7.09 | gpu | 70.3 | 0.99 | - |" in text


def test_the_rehearsal_of_the_h200_script_is_read_with_the_cpu_profile(tmp_path: Path) -> None:
    assert main([*map(str, sorted(REHEARSAL.glob("q-*-results.json"))), "--out", str(tmp_path / "c.md")]) == 0
    text = (tmp_path / "c.md").read_text()
    assert text.count("the sim's profile cpu-eigen-b6c96") == 2 and "b2c32nbt+attn" in text


def test_the_h200_script_says_what_it_needs_and_refuses_to_run_without_out() -> None:
    script = REPO / "benchmarks" / "gpu_h200.sh"
    usage = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=30, check=True).stdout
    assert ".device/katago-v1.17.2-cpp-src.tar.gz" in usage and "--rehearse" in usage
    env = {"PATH": "/usr/bin:/bin", "HOME": str(REPO)}
    done = subprocess.run([str(script)], capture_output=True, text=True, timeout=30, env=env, check=False)
    assert done.returncode == 2 and "$OUT is not set" in done.stderr
