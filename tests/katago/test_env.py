"""How the tier is switched on (these run without KataGo): the two variables, and the skip with its reason."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.katago.conftest import BIN_ENV, MODEL_ENV, SKIP_REASON, katago_from_env


def test_unset_means_off_and_half_set_is_an_error(tmp_path: Path) -> None:
    binary = tmp_path / "katago"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    model = tmp_path / "net.bin.gz"
    model.write_bytes(b"x")
    assert katago_from_env({}) is None
    found = katago_from_env({BIN_ENV: str(binary), MODEL_ENV: str(model)})
    assert found is not None and found.binary == binary and found.model == model
    with pytest.raises(ValueError, match=f"{MODEL_ENV} is not set"):
        katago_from_env({BIN_ENV: str(binary)})
    with pytest.raises(ValueError, match=f"{MODEL_ENV}=.*missing.bin.gz is not a file"):
        katago_from_env({BIN_ENV: str(binary), MODEL_ENV: str(tmp_path / "missing.bin.gz")})
    model.chmod(0o644)
    with pytest.raises(ValueError, match=f"{BIN_ENV}=.*net.bin.gz is not an executable file"):
        katago_from_env({BIN_ENV: str(model), MODEL_ENV: str(model)})


@pytest.mark.slow
def test_without_the_variables_the_tier_is_skipped_with_its_reason() -> None:
    env = {key: value for key, value in os.environ.items() if key not in (BIN_ENV, MODEL_ENV)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "tests/katago/test_enginebench.py"],
        cwd=REPO, env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"tests/katago/test_enginebench.py: {SKIP_REASON}" in run.stdout, run.stdout
    assert "2 skipped" in run.stdout and "passed" not in run.stdout
