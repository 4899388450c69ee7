"""A race that fails part-way leaves its account on the sweep's run (kgbench.race=failed: ...), and the sweep goes
on to its summary: the replicates it launched are in MLflow, so a missing tag must not read as "no contenders"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from kgbench.sweep import racing
from kgbench.sweep.callbacks import ENV_PARENT
from kgbench.track.schema import RACE
from tests.helpers.mlflow_store import seeded_uri


def test_a_race_that_fails_tags_the_sweeps_run_and_does_not_raise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = seeded_uri(tmp_path / "mlflow.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("race-failure", artifact_location=str(tmp_path / "artifacts"))
    parent = client.create_run(experiment).info.run_id
    monkeypatch.setenv(ENV_PARENT, parent)

    def broken(*_: Any) -> None:
        raise RuntimeError("the launcher lost its node")

    monkeypatch.setattr(racing, "_race", broken)
    sweeper = type("Sweeper", (), {"launcher": None, "config": None})()
    racing.race_after_sweep(sweeper, [[1, 2]])  # never raises
    assert client.get_run(parent).data.tags[RACE] == "failed: RuntimeError: the launcher lost its node"
    assert "the race of the contenders did not run to its end: RuntimeError" in capsys.readouterr().err
