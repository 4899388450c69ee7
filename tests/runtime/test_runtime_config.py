"""kgserve.runtime_config: the one reader of runtime/config.yaml for the shell scripts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kgserve.runtime_config import env_lines, get_value, main, pin_sha256
from kgserve.settings import DEFAULT_CONFIG_PATH, ConfigError, Settings, load_settings

from .conftest import REPO


def test_get_prints_values_of_the_shipped_config(shipped: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    assert shipped.cluster is not None
    assert get_value(shipped, "cluster.node") == shipped.cluster.node == "hopper-34"
    assert get_value(shipped, "server.port") == str(shipped.server.port)
    assert get_value(shipped, "cluster.queue") == ""
    assert get_value(shipped, "cluster.image_path") == str(REPO / "runtime" / "kgbench.sqsh")
    assert main(["get", "release.url.trt"]) == 0
    assert capsys.readouterr().out.strip().endswith("/v1.18.1/katago-v1.18.1-trt10.9.0-cuda12.8-linux-x64.zip")


def test_env_lines_survive_a_shell_round_trip(shipped: Settings) -> None:
    script = (
        "\n".join(env_lines(shipped))
        + '\nprintf "%s|%s|%s" "$KG_CLUSTER_BASE_IMAGE" "$KG_SERVER_PORT" "$KG_CLUSTER_QUEUE"'
    )
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    assert shipped.cluster is not None
    assert out == f"{shipped.cluster.base_image}|{shipped.server.port}|"


def test_unknown_key_exits_2_with_one_message() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kgserve.runtime_config", "get", "cluster.nodes"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("runtime_config: no key 'cluster.nodes'")
    assert "Traceback" not in result.stderr


def test_pin_edits_one_line_and_keeps_digit_only_digests_strings(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    original = DEFAULT_CONFIG_PATH.read_text(encoding="utf-8")
    path.write_text(original, encoding="utf-8")
    pin_sha256(path, "release.sha256.trt", "1" * 64)
    pin_sha256(path, "release.network.sha256", "ab" * 32)
    pin_sha256(path, "release.alternatives.zhizi-b40c768nbt.sha256", "cd" * 32)
    changed = [(a, b) for a, b in zip(original.splitlines(), path.read_text().splitlines(), strict=True) if a != b]
    assert changed == [
        ("    trt: null", f'    trt: "{"1" * 64}"'),
        ("    sha256: 93bdb63a3bfae4a70db0cb5265287495ecfc10b1ba1cc6814feeba1cdf055871", f'    sha256: "{"ab" * 32}"'),
        ("      sha256: null", f'      sha256: "{"cd" * 32}"'),
    ]
    release = load_settings(path).release
    assert release is not None and release.sha256["trt"] == "1" * 64 and release.network.sha256 == "ab" * 32
    assert release.alternatives["zhizi-b40c768nbt"].sha256 == "cd" * 32


@pytest.mark.parametrize(
    ("key", "digest", "message"),
    [
        ("release.sha256.cuda", "xyz", "not a sha256"),
        ("server.port", "a" * 64, "only release.sha256"),
    ],
)
def test_pin_refuses_bad_input(tmp_path: Path, key: str, digest: str, message: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(DEFAULT_CONFIG_PATH.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        pin_sha256(path, key, digest)
