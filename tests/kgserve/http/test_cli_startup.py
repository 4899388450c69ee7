"""`python -m kgserve` start-up checks: a missing binary, model or cfg exits 2 with one paragraph."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kgserve.auth import exposure_warning
from kgserve.settings import ServerSettings
from tests.conftest import REPO


def run_kgserve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kgserve", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def assert_one_paragraph(stderr: str) -> str:
    text = stderr.strip()
    assert text, "no message on stderr"
    assert "\n\n" not in text and "Traceback" not in text
    return text


@pytest.mark.parametrize(
    ("sections", "path", "key"),
    [
        (
            {"engine.backends.sim": {"model": "/nonexistent/kgsim.bin.gz"}},
            "/nonexistent/kgsim.bin.gz",
            "engine.backends.sim.model",
        ),
        ({"engine": {"cfg": "/nonexistent/serving.cfg"}}, "/nonexistent/serving.cfg", "engine.cfg"),
        (
            {"engine.backends.sim": {"command": ["/nonexistent/bin/katago"]}},
            "/nonexistent/bin/katago",
            "engine.backends.sim.command",
        ),
    ],
    ids=["model", "cfg", "binary"],
)
def test_missing_file_exits_2_naming_path_and_key(
    tmp_path: Path, config_writer: Any, sections: dict[str, Any], path: str, key: str
) -> None:
    config = config_writer(tmp_path, **sections)
    result = run_kgserve("--config", str(config), "--port", "0")
    assert result.returncode == 2, result.stderr
    text = assert_one_paragraph(result.stderr)
    assert path in text and key in text and str(config) in text


def test_missing_katago_binary_for_a_real_backend(tmp_path: Path, config_writer: Any) -> None:
    config = config_writer(tmp_path, **{"engine.backends.cuda": {"command": [str(tmp_path / "bin/katago")]}})
    result = run_kgserve("--config", str(config), "--backend", "cuda", "--port", "0")
    assert result.returncode == 2
    text = assert_one_paragraph(result.stderr)
    assert str(tmp_path / "bin/katago") in text and "engine.backends.cuda.command" in text


def test_unloadable_config_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("server: {port: nine}\n", encoding="utf-8")
    result = run_kgserve("--config", str(config))
    assert result.returncode == 2
    assert str(config) in result.stderr and "Traceback" not in result.stderr


def test_non_loopback_bind_without_token_warns() -> None:
    assert exposure_warning(ServerSettings.model_validate({"host": "127.0.0.1", "port": 1}), None) is None
    assert exposure_warning(ServerSettings.model_validate({"host": "0.0.0.0", "port": 1}), "token") is None
    warning = exposure_warning(
        ServerSettings.model_validate({"host": "0.0.0.0", "port": 1, "auth_token_env": "KG_TOKEN"}), None
    )
    assert warning is not None and "0.0.0.0" in warning and "KG_TOKEN" in warning


def test_a_synthetic_net_is_served_only_as_a_throughput_test(tmp_path: Path, config_writer: Any) -> None:
    """A net of random weights (`python -m kgbench.nets synth`) answers noise: kgserve refuses it unless told the run
    is a throughput test, and then /readyz says so."""
    from kgbench.nets import architecture, write_synthetic
    from tests.conftest import kgserve_ready

    net = tmp_path / "synthetic-b2c32nbt.bin.gz"
    write_synthetic(architecture("b2c32nbt"), net)
    config = config_writer(tmp_path, **{"engine.backends.sim": {"model": str(net)}})
    refused = run_kgserve("--config", str(config), "--port", "0")
    assert refused.returncode == 2, refused.stderr
    text = assert_one_paragraph(refused.stderr)
    assert "synthetic net (synthetic-b2c32nbt" in text and "engine.backends.sim.model" in text
    assert "--throughput-test" in text
    with kgserve_ready(config, None, "--throughput-test") as (_, ready):
        assert ready["synthetic_net"] is True and ready["throughput_test"] is True
