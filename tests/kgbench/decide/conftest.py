"""A real MLflow sqlite store in tmp_path with planted kgbench sweeps (parent run + job runs)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from kgbench.track.record import JobRecord, file_sha256, log_job_record
from kgbench.track.schema import ENGINE_BINARY, ENGINE_MODEL, SERVING_CHANGES
from kgserve.settings import load_settings
from tests.conftest import REPO
from tests.helpers.mlflow_store import seeded_uri

# the network runtime/config.yaml serves (its file name, as a job's model_file tag records it)
SERVED_MODEL = load_settings().engine.model_for("cuda").name


@dataclass
class Store:
    uri: str
    client: MlflowClient
    experiment_id: str
    root: Path
    sweeps: dict[str, str] = field(default_factory=dict)  # sweep id -> parent run id

    def sweep(self, sweep_id: str) -> str:
        parent = self.client.create_run(
            self.experiment_id,
            tags={"kgbench.role": "sweep", "kgbench.sweep_id": sweep_id},
            run_name=f"sweep-{sweep_id}",
        )
        self.client.set_terminated(parent.info.run_id, "FINISHED")
        self.sweeps[sweep_id] = parent.info.run_id
        return parent.info.run_id

    def job(
        self,
        sweep_id: str,
        name: str,
        *,
        backend: str = "cuda",
        metrics: Mapping[str, float] | None = None,
        params: Mapping[str, str] | None = None,
        tags: Mapping[str, str] | None = None,
        status: str = "FINISHED",
        cfg: str | None = None,
        series: Mapping[str, Mapping[int, float]] | None = None,
    ) -> str:
        all_tags = {
            "kgbench.role": "job",
            "kgbench.sweep_id": sweep_id,
            "mlflow.parentRunId": self.sweeps[sweep_id],
            "backend": backend,
            "simulated": "false",
            "katago_version": "1.16.3",
            "model_file": SERVED_MODEL,
            "kgbench.status": "ok" if status == "FINISHED" else "failed",
            "kgbench.unstable": "false",
            "kgbench.invalid": "false",
            **(tags or {}),
        }
        run = self.client.create_run(self.experiment_id, tags=all_tags, run_name=name)
        run_id = run.info.run_id
        for key, text in {"backend": backend, **(params or {})}.items():
            self.client.log_param(run_id, key, text)
        for key, value in (metrics or {}).items():
            self.client.log_metric(run_id, key, value)
        for key, steps in (series or {}).items():
            for step, number in steps.items():
                self.client.log_metric(run_id, key, number, step=step)
        body = cfg if cfg is not None else f"# rendered by kgbench for {name}\nnnMaxBatchSize = 64\n"
        cfg_dir = self.root / "cfgs" / run_id
        cfg_dir.mkdir(parents=True)
        (cfg_dir / "katago.cfg").write_text(body)
        self.client.log_artifact(run_id, str(cfg_dir / "katago.cfg"))
        self._record(run_id, cfg_dir, all_tags)
        self.client.set_terminated(run_id, status)
        return run_id

    def _record(self, run_id: str, folder: Path, tags: Mapping[str, str]) -> None:
        """The integrity record a job writes (kgbench.sweep.job._log_record), of what the planted tags say it ran."""
        binary = tags.get(ENGINE_BINARY, "")
        digest = file_sha256(binary) if binary and Path(binary).is_file() else ""
        changes = json.loads(tags.get(SERVING_CHANGES) or "[]")
        record = JobRecord(file_sha256(folder / "katago.cfg"), binary, digest, tags.get(ENGINE_MODEL, ""), changes)
        log_job_record(self.client, run_id, record, folder)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    uri = seeded_uri(tmp_path / "mlflow.db")  # creating the sqlite schema takes seconds: an empty one copied in
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("kgbench", artifact_location=(tmp_path / "mlruns").as_uri())
    return Store(uri=uri, client=client, experiment_id=exp, root=tmp_path)


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    """A copy of the real runtime/config.yaml; its relative paths resolve inside tmp_path/runtime."""
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    target = runtime / "config.yaml"
    shutil.copy(REPO / "runtime" / "config.yaml", target)
    return target
