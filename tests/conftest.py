"""What every test folder shares: the checkout's paths, the KataGo reference transcripts, one analysis-query
builder, the simulated engine's environment and kgserve as a subprocess of this checkout.

Import the names (`from tests.conftest import REPO, analysis_query`); the `kgserve_process` fixture hands out
`start_kgserve` for tests that take it as a fixture.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from kgbench.targets.kgserve_process import KgserveProcess
from kgserve.paths import PROJECT_ROOT
from tests.helpers.alone import MARK, pytest_runtest_protocol  # noqa: F401 (a hook: each test beside others, or alone)

# The suite runs beside other work on shared machines (a developer's two cores, CI): a kgbench job there would be
# flagged contended and set aside by promote, whatever the test checks. Every job started by a test (in this process
# or a subprocess, which inherits it) gets contention.check=false unless the shell set it; the contention tests pass
# contention.check=true themselves (tests/kgbench/sweep/test_contention_jobs.py).
os.environ.setdefault("KGBENCH_CONTENTION_CHECK", "false")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The `alone` tests first, one after another while the other workers wait, then the slow ones, then the rest:
    xdist hands the workers tests in this order, two at a time (addopts), so they start on the long ones and end on
    short ones, and no worker is left running one long test while the others stand idle. The order within each
    kind is kept."""
    items.sort(key=lambda item: (item.get_closest_marker(MARK) is None, item.get_closest_marker("slow") is None))


REPO = PROJECT_ROOT  # this checkout (kgserve.paths)
REFERENCE = REPO / "tests" / "data" / "katago-reference"  # real KataGo v1.17.2 transcripts (its README)
SIM_MODEL = REPO / "assets" / "sim" / "kgsim-b40c768.bin.gz"  # the file the simulated engine loads as its net

# kgserve started by the tests runs the simulated engine fast and starts it at once
KGSERVE_SIM_SPEED = 1000.0
KGSERVE_SIM_STARTUP_S = "0.05"


def analysis_query(
    query_id: str | None = "q",
    *,
    moves: Sequence[Sequence[str]] = (),
    size: int = 19,
    max_visits: int | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A KataGo analysis query: Chinese rules, komi 7.5, `moves` on a size x size board, `fields` added last
    (`analyzeTurns=[0, 1]`, `reportDuringSearchEvery=0.1`, ...). `query_id=None` leaves the id out."""
    query: dict[str, Any] = {} if query_id is None else {"id": query_id}
    query.update(moves=[list(move) for move in moves], rules="chinese", komi=7.5, boardXSize=size, boardYSize=size)
    if max_visits is not None:
        query["maxVisits"] = max_visits
    query.update(fields)
    return query


def serving_cfg_with_threads(directory: Path, threads: int) -> Path:
    """The tracked serving cfg (runtime/katago_serving.cfg) with `numAnalysisThreads = threads`, written into
    `directory`: tests that need an engine whose analysis threads run out (queues, the thread reserve)."""
    serving = (REPO / "runtime" / "katago_serving.cfg").read_text(encoding="utf-8")
    cfg = directory / f"serving_{threads}_threads.cfg"
    cfg.write_text(re.sub(r"(?m)^numAnalysisThreads\s*=.*$", f"numAnalysisThreads = {threads}", serving), "utf-8")
    return cfg


def sim_env(speed: float = KGSERVE_SIM_SPEED, *, device: str = "private", **extra: str) -> dict[str, str]:
    """This process's environment for a simulated engine: the shell's own KGSERVE_SIM_* variables removed (so a
    developer's setting cannot change a test), then the speed, the device (`private`: one per engine process,
    no sharing between tests) and `extra` (KGSERVE_SIM_SEED, KGSERVE_SIM_FIXED_RPS, ...)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("KGSERVE_SIM_")}
    env.update(KGSERVE_SIM_SPEED=f"{speed:g}", KGSERVE_SIM_DEVICE=device)
    env.update(extra)
    return env


def start_kgserve(
    config: Path, env: dict[str, str] | None = None, *args: str, cwd: Path = REPO, log_dir: Path | None = None
) -> KgserveProcess:
    """`python -m kgserve --config CONFIG --port 0 ARGS` (from this checkout unless `cwd` and `env`'s PYTHONPATH
    say otherwise), started but not waited for: call `wait_listening()` and `wait_ready(timeout)`, and stop it.
    The simulated engine runs fast unless `env` says otherwise. Its log: `kgserve-<id>.log` in `log_dir`
    (default: beside the config)."""
    full_env = {**sim_env(KGSERVE_SIM_STARTUP_S=KGSERVE_SIM_STARTUP_S), "PYTHONPATH": str(REPO), **(env or {})}
    log = (log_dir or (cwd / config).parent) / f"kgserve-{uuid.uuid4().hex[:8]}.log"
    process = KgserveProcess(config, log, full_env, args=args, cwd=cwd)
    process.start()
    return process


@contextlib.contextmanager
def kgserve_ready(
    config: Path,
    env: dict[str, str] | None = None,
    *args: str,
    cwd: Path = REPO,
    log_dir: Path | None = None,
    timeout_s: float = 120.0,
) -> Iterator[tuple[KgserveProcess, dict[str, Any]]]:
    """`start_kgserve`, then wait until it is ready: yields (the process, its /readyz JSON); SIGTERM on the way
    out."""
    process = start_kgserve(config, env, *args, cwd=cwd, log_dir=log_dir)
    try:
        process.wait_listening(timeout_s)
        _, ready = process.wait_ready(timeout_s)
        yield process, ready
    finally:
        process.stop()


@pytest.fixture(scope="session")
def kgserve_process() -> Iterator[Callable[..., KgserveProcess]]:
    """`start_kgserve`; at the end of the session, every kgserve it started that still runs is stopped (a test
    that failed before its own `stop()` would leave one behind; a hung one is killed)."""
    started: list[KgserveProcess] = []

    def start(*args: Any, **kwargs: Any) -> KgserveProcess:
        process = start_kgserve(*args, **kwargs)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop(grace_s=5.0)
