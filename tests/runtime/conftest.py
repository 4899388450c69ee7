"""Fixtures for the runtime scripts: stub cluster tools on PATH, a config copy in tmp, a fake download mirror."""

from __future__ import annotations

import gzip
import json
import os
import stat
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kgserve.settings import DEFAULT_CONFIG_PATH, Settings, load_settings
from tests.conftest import REPO

RUNTIME = REPO / "runtime"
STUB_NAMES = ("qsub", "enroot", "tmux", "nvidia-smi", "curl", "wget", "hostname")

FAKE_APPIMAGE = """#!/usr/bin/env bash
# stands in for KataGo's AppImage: only --appimage-extract works (no FUSE here either)
if [ "${1:-}" = --appimage-extract ]; then
  mkdir -p squashfs-root/usr/bin
  printf '#!/usr/bin/env bash\\necho "KataGo fake AppRun: $*"\\n' > squashfs-root/AppRun
  chmod +x squashfs-root/AppRun
  exit 0
fi
echo "fuse: device not found" >&2
exit 1
"""


@dataclass
class Stubs:
    bin_dir: Path
    log: Path
    mirror: Path
    env: dict[str, str] = field(default_factory=dict)

    def calls(self, name: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        records = [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]
        return [r for r in records if name is None or r["cmd"] == name]

    def run(
        self, argv: list[str], *, extra_env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        env = {**self.env, **(extra_env or {})}
        return subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture
def stubs(tmp_path: Path) -> Stubs:
    bin_dir = tmp_path / "stubbin"
    bin_dir.mkdir()
    stub = bin_dir / "stub.py"
    stub.write_text(f"#!{sys.executable}\n" + (Path(__file__).parent / "stub.py").read_text())
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    for name in STUB_NAMES:
        (bin_dir / name).symlink_to(stub)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    log = tmp_path / "stub-calls.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KG_", "PBS_", "STUB_"))}
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        STUB_LOG=str(log),
        STUB_MIRROR=str(mirror),
        KG_PYTHON=sys.executable,
    )
    return Stubs(bin_dir=bin_dir, log=log, mirror=mirror, env=env)


@pytest.fixture
def shipped() -> Settings:
    return load_settings()


@pytest.fixture
def config_copy(tmp_path: Path, stubs: Stubs, shipped: Settings) -> Path:
    """runtime/config.yaml copied to tmp/runtime/ (downloads, logs and the image land there), with a mirror
    holding fake release zips and a small fake network whose size the copy states."""
    assert shipped.release is not None
    network = gzip.compress(b"fake network bytes\n" * 10, mtime=0)  # a .bin.gz is gzip: fetch_katago.sh checks
    (stubs.mirror / shipped.release.network.name).write_bytes(network)
    for asset in shipped.release.assets.values():
        with zipfile.ZipFile(stubs.mirror / asset, "w") as archive:
            info = zipfile.ZipInfo("katago")
            info.external_attr = 0o755 << 16
            archive.writestr(info, FAKE_APPIMAGE)
            archive.writestr("default_gtp.cfg", "# fake\n")
            archive.writestr("README.txt", "fake release\n")
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    text = DEFAULT_CONFIG_PATH.read_text(encoding="utf-8")
    size_line = f"size_bytes: {shipped.release.network.size_bytes}"
    assert size_line in text
    text = text.replace(size_line, f"size_bytes: {len(network)}")
    if shipped.release.network.sha256:  # the pin's published sha256 is the real file's: the fake one is pinned anew
        text = text.replace(f"sha256: {shipped.release.network.sha256}", "sha256: null")
    path = runtime / "config.yaml"
    path.write_text(text, encoding="utf-8")
    stubs.env["KG_CONFIG"] = str(path)
    return path
