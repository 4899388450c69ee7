"""The batch command's tests: `python -m kgserve.batch` as a subprocess, against the simulated engine in its own
pool (--config) or behind a real kgserve on a free loopback port."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, sim_env, start_kgserve
from tests.kgserve.http.conftest import write_config

GAMES = REPO / "assets" / "analysis" / "games" / "9x9"
HANDICAP = "(;GM[1]FF[4]SZ[9]KM[0.5]HA[2]RU[Chinese]AB[cc][gg];W[ee];B[dd];W[ff];B[fd])"
SIM_SPEED = 10.0  # slow enough that a run of ~80 rows is still going when a test kills it, fast enough for seconds


def batch_env(speed: float = SIM_SPEED) -> dict[str, str]:
    return {**sim_env(speed, KGSERVE_SIM_STARTUP_S="0.05"), "PYTHONPATH": str(REPO)}


def batch_argv(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "kgserve.batch", *map(str, args)]


def run_batch(*args: str | Path, speed: float = SIM_SPEED) -> subprocess.CompletedProcess[str]:
    return subprocess.run(batch_argv(*args), env=batch_env(speed), capture_output=True, text=True, timeout=180)


def start_batch(*args: str | Path, log: Path, speed: float = SIM_SPEED) -> subprocess.Popen[bytes]:
    with log.open("ab") as sink:
        return subprocess.Popen(batch_argv(*args), env=batch_env(speed), stdout=sink, stderr=sink)


def journalled(output: Path) -> int:
    """Rows in the run's journal so far (complete lines after the header)."""
    try:
        text = output.with_name(output.name + ".partial.jsonl").read_bytes()
    except FileNotFoundError:
        return 0
    return max(0, text.count(b"\n") - 1)


def wait_until(condition: object, what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:g} s: {what}")
        time.sleep(0.02)


def answers(output: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]


def shape(answer: dict[str, object]) -> tuple[object, ...]:
    """What an answer looks like, not its numbers: id, keys, kind, turn."""
    return answer.get("id"), tuple(sorted(answer)), answer.get("isDuringSearch"), answer.get("turnNumber")


@pytest.fixture
def games(tmp_path: Path) -> Path:
    """Two real 9x9 records, a handicap record and a broken one."""
    folder = tmp_path / "games"
    folder.mkdir()
    for path in sorted(GAMES.glob("*.sgf"))[:2]:
        shutil.copy(path, folder / path.name)
    (folder / "handicap.sgf").write_text(HANDICAP, encoding="utf-8")
    (folder / "broken.sgf").write_text("(;SZ[9];B[ee]", encoding="utf-8")
    return folder


@pytest.fixture
def sim_config(tmp_path: Path) -> Path:
    """runtime/config.yaml on the sim; kgserve's grace short, so a restart cuts queries (they are tried again)."""
    return write_config(tmp_path, server={"grace_period_s": 0.5})


@pytest.fixture
def kgserve_url(sim_config: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A real kgserve on the sim on a free port: (its URL, its config)."""
    process = start_kgserve(sim_config, {**batch_env(), "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO))},
                            log_dir=tmp_path)  # fmt: skip
    try:
        url = process.wait_listening(120)
        process.wait_ready(120)
        yield url, sim_config
    finally:
        process.stop()
