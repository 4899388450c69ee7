"""Fixtures for the simulated engine tests: run `python -m kgserve.sim` as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REFERENCE, REPO, SIM_MODEL
from tests.conftest import sim_env as root_sim_env

MODEL = SIM_MODEL
BASE_CFG = (REFERENCE / "analysis.cfg").read_text()
DEVICE_PREFIX = f"simtest-{os.getpid()}-"  # each test gets its own simulated device (no cross-talk)


@pytest.fixture(autouse=True, scope="session")
def _remove_device_files() -> Iterator[None]:
    yield
    for path in Path(tempfile.gettempdir()).glob(f"kgserve-sim-device-{DEVICE_PREFIX}*"):
        path.unlink(missing_ok=True)


@dataclass
class Run:
    stdout: list[str]
    stderr: str
    returncode: int

    def json_lines(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.stdout]


def write_cfg(tmp_path: Path, text: str = BASE_CFG, name: str = "analysis.cfg", **overrides: object) -> Path:
    lines = [line for line in text.splitlines() if line.split("=")[0].strip() not in overrides]
    lines += [f"{key} = {value}" for key, value in overrides.items()]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def sim_env(speed: float = 200.0, **extra: str) -> dict[str, str]:
    """tests/conftest.py's simulated-engine environment on a device of this test's own (no cross-talk)."""
    device = f"{DEVICE_PREFIX}{uuid.uuid4().hex[:8]}"
    return root_sim_env(speed, device=device, **{"KGSERVE_SIM_STARTUP_S": "0.01", **extra})


def sim_argv(cfg: Path, model: Path | str = MODEL, command: str = "analysis") -> list[str]:
    return [sys.executable, "-m", "kgserve.sim", command, "-config", str(cfg), "-model", str(model)]


class Sim:
    """A running simulated engine: write request lines (optionally with pauses), then close stdin and collect."""

    def __init__(self, cfg: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            sim_argv(cfg), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO
        )

    def send(self, line: str | bytes) -> None:
        assert self.proc.stdin is not None
        data = line.encode() if isinstance(line, str) else line
        self.proc.stdin.write(data.rstrip(b"\n") + b"\n")
        self.proc.stdin.flush()

    def readline(self) -> dict[str, object]:
        assert self.proc.stdout is not None
        return json.loads(self.proc.stdout.readline())

    def finish(self, timeout: float = 60.0) -> Run:
        out, err = self.proc.communicate(timeout=timeout)
        return Run([line for line in out.decode().splitlines() if line], err.decode(), self.proc.returncode)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


@pytest.fixture
def start_sim(tmp_path: Path) -> Iterator[Callable[..., Sim]]:
    started: list[Sim] = []

    def start(cfg: Path | None = None, speed: float = 200.0, **env: str) -> Sim:
        sim = Sim(cfg or write_cfg(tmp_path), sim_env(speed, **env))
        started.append(sim)
        return sim

    yield start
    for sim in started:
        sim.kill()


def run_lines(
    cfg: Path, lines: Sequence[str | bytes], speed: float = 200.0, pauses: list[float] | None = None, **env: str
) -> Run:
    sim = Sim(cfg, sim_env(speed, **env))
    try:
        for i, line in enumerate(lines):
            if pauses and i < len(pauses) and pauses[i]:
                time.sleep(pauses[i])
            sim.send(line)
        return sim.finish()
    finally:
        sim.kill()
