"""The real-KataGo tier: tests marked `katago` run against a real KataGo binary and network.

Two environment variables name them: KGBENCH_KATAGO_BIN (the `katago` executable, any backend; the Eigen CPU
build is what CI has) and KGBENCH_KATAGO_MODEL (a network file). Unset, every `katago` test is skipped with
SKIP_REASON; set to something that is not there, the tests fail and say which variable is wrong.

The runtime config of the tier (`tier_config`) is runtime/config.yaml written into a temporary folder with the
`eigen` backend pointed at the two files and a small analysis cfg (TIER_CFG), sized so that a 2-core machine
answers a short query within a second.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kgbench.targets.kgserve_process import KgserveProcess
from kgserve.katago_cfg import cfg_text
from kgserve.settings import Settings, load_settings
from tests.conftest import start_kgserve as start_kgserve_process
from tests.kgserve.http.conftest import write_config

BIN_ENV = "KGBENCH_KATAGO_BIN"
MODEL_ENV = "KGBENCH_KATAGO_MODEL"
SKIP_REASON = f"set {BIN_ENV} and {MODEL_ENV} to run the real-KataGo tier"
BACKEND = "eigen"

# Few analysis threads with one search thread each: on 2 cores, more threads only queue for the CPU.
# maxVisits is the default for queries that give none; every test query sets its own, small.
TIER_CFG: dict[str, object] = {
    "maxVisits": 50,
    "numAnalysisThreads": 4,
    "numSearchThreadsPerAnalysisThread": 1,
    "nnMaxBatchSize": 8,
    "nnCacheSizePowerOfTwo": 16,
    "nnMutexPoolSizePowerOfTwo": 12,
    "reportAnalysisWinratesAs": "BLACK",
}


@dataclass(frozen=True)
class RealKatago:
    binary: Path
    model: Path


def katago_from_env(environ: dict[str, str] | None = None) -> RealKatago | None:
    """The binary and model the two variables name; None when neither is set; ValueError when they are unusable."""
    env = os.environ if environ is None else environ
    binary, model = env.get(BIN_ENV, ""), env.get(MODEL_ENV, "")
    if not binary and not model:
        return None
    problems = [f"{name} is not set" for name, value in ((BIN_ENV, binary), (MODEL_ENV, model)) if not value]
    if binary and not (Path(binary).is_file() and os.access(binary, os.X_OK)):
        problems.append(f"{BIN_ENV}={binary} is not an executable file")
    if model and not Path(model).is_file():
        problems.append(f"{MODEL_ENV}={model} is not a file")
    if problems:
        raise ValueError("the real-KataGo tier cannot run: " + "; ".join(problems))
    return RealKatago(Path(binary).absolute(), Path(model).absolute())  # symlinks kept: argv[0] as the user named it


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    try:
        enabled = katago_from_env() is not None
    except ValueError:
        enabled = True  # the `real_katago` fixture fails each test with the reason
    if enabled:
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        if item.get_closest_marker("katago") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def real_katago() -> RealKatago:
    problem = ""
    try:
        found = katago_from_env()
    except ValueError as exc:
        problem, found = str(exc), None
    if problem:
        pytest.fail(problem, pytrace=False)
    if found is None:
        pytest.skip(SKIP_REASON)
    return found


def write_tier_cfg(directory: Path, overrides: dict[str, object] | None = None) -> Path:
    """TIER_CFG (with `overrides`) as `directory`/analysis.cfg."""
    keys = {**TIER_CFG, **(overrides or {})}
    path = directory / "analysis.cfg"
    path.write_text(cfg_text(keys), encoding="utf-8")
    return path


def tier_config(
    directory: Path, katago: RealKatago, *, cfg: dict[str, object] | None = None, **sections: dict[str, Any]
) -> Path:
    """runtime/config.yaml in `directory` serving the real engine (backend eigen) with the tier's cfg.

    `cfg` overrides analysis-cfg keys; `sections` are merged into the config as tests/kgserve/http's write_config does
    (e.g. `limits={"max_visits": 10**7}`)."""
    cfg_path = write_tier_cfg(directory, cfg)
    engine = {
        "cfg": str(cfg_path),
        "model": str(katago.model),
        "home_data_dir": str(directory / "katago_home"),
        "restart_backoff_initial_s": 0.2,
        "restart_backoff_max_s": 1.0,
        **sections.pop("engine", {}),
    }
    backend = {
        "command": [str(katago.binary)],
        "startup_timeout_s": 60,
        **sections.pop(f"engine.backends.{BACKEND}", {}),
    }
    return write_config(
        directory, backend=BACKEND, engine=engine, **{f"engine.backends.{BACKEND}": backend}, **sections
    )


def tier_settings(directory: Path, katago: RealKatago, **kwargs: Any) -> Settings:
    return load_settings(tier_config(directory, katago, **kwargs))


def start_kgserve(config: Path, timeout: float = 90.0) -> KgserveProcess:
    """`python -m kgserve --config CONFIG --port 0`, listening and ready (the caller stops it)."""
    process = start_kgserve_process(config)
    try:
        process.wait_listening(timeout)
        process.wait_ready(timeout)
    except BaseException:
        process.stop()
        raise
    return process
