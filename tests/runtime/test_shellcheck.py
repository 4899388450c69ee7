"""Every script in runtime/ is shellcheck clean (CI installs shellcheck; see .ci/run)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from .conftest import REPO, RUNTIME

SCRIPTS = sorted(p.relative_to(REPO).as_posix() for p in [*RUNTIME.glob("*.sh"), *RUNTIME.glob("*.pbs")])


def test_the_runtime_scripts_exist() -> None:
    assert set(SCRIPTS) >= {
        "runtime/_common.sh",
        "runtime/enroot_create.pbs",
        "runtime/enroot_start.pbs",
        "runtime/fetch_katago.sh",
        "runtime/serve_analysis.sh",
        "runtime/qualify_node.pbs",
        "runtime/build_katago.sh",
    }


@pytest.mark.skipif(
    shutil.which("shellcheck") is None, reason="shellcheck is not installed (apt-get install shellcheck)"
)
@pytest.mark.parametrize("script", SCRIPTS)
def test_shellcheck_clean(script: str) -> None:
    result = subprocess.run(
        ["shellcheck", "--external-sources", "--shell=bash", "--severity=style", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
