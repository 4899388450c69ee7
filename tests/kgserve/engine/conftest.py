"""Fixtures for the engine wrapper and pool tests: a scripted fake engine and a simulated one."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kgserve.engine.engine import EngineSpec
from kgserve.settings import Settings, load_settings
from tests.conftest import REFERENCE, REPO

FAKE = Path(__file__).resolve().parent / "fake_engine.py"


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "model.bin.gz"
    path.write_bytes(b"fake")
    return path


def fake_argv(model: Path, cfg: Path | None = None) -> list[str]:
    return [
        sys.executable,
        str(FAKE),
        "analysis",
        "-config",
        str(cfg or REFERENCE / "analysis.cfg"),
        "-model",
        str(model),
    ]


@pytest.fixture
def fake_spec(model_file: Path) -> Callable[..., EngineSpec]:
    def build(*, env: dict[str, str] | None = None, model: Path | None = None, **overrides: Any) -> EngineSpec:
        values: dict[str, Any] = {
            "argv": fake_argv(model or model_file),
            "env": {**_base_env(), **(env or {})},
            "startup_timeout_s": 30.0,
            "label": "engine[0]",
            "stderr_tail_lines": 20,
        }
        values.update(overrides)
        return EngineSpec(**values)

    return build


def _base_env() -> dict[str, str]:
    import os

    return {key: value for key, value in os.environ.items() if not key.startswith(("FAKE_", "KGSERVE_SIM"))}


def pool_settings(processes: int = 1, **engine: Any) -> Settings:
    settings = load_settings(REPO / "runtime" / "config.yaml").with_overrides(backend="sim", port=0)
    values: dict[str, Any] = {
        "processes": processes,
        "restart_backoff_initial_s": 0.2,
        "restart_backoff_max_s": 1.0,
        **engine,
    }
    return settings.model_copy(update={"engine": settings.engine.model_copy(update=values)})
