"""The job's integrity record: what a job measured, written once at measure time and pinned by immutable params.

A run's tags can be rewritten by anyone who may write to the tracking store (`MlflowClient.set_tag`), and so can its
artifacts on disk; its params cannot (MLflow refuses to log a param twice with another value). A job therefore writes
`kgbench_record.json` (the KataGo binary it ran and that file's sha256, the model, the sha256 of the `katago.cfg`
artifact it logged, the serving changes its load generator needed) and logs the record's sha256 and the cfg's
sha256 as params. `kgbench.promote` (kgbench.decide.integrity) writes a runtime only from a record whose sha256 is
the param's, and a cfg whose sha256 is the record's: never from a tag.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

__all__ = [
    "CFG_SHA256_PARAM",
    "RECORD_ARTIFACT",
    "RECORD_SHA256_PARAM",
    "JobRecord",
    "file_sha256",
    "log_job_record",
    "record_text",
    "resolve_binary",
    "text_sha256",
]

RECORD_ARTIFACT = "kgbench_record.json"
RECORD_SHA256_PARAM = "kgbench.record_sha256"  # sha256 of the record artifact's bytes
CFG_SHA256_PARAM = "kgbench.cfg_sha256"  # sha256 of the katago.cfg artifact's bytes
SCHEMA = 1


def text_sha256(data: bytes | str) -> str:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def resolve_binary(program: str) -> Path | None:
    """The file a command's first word runs: a path as is, a bare name looked up on PATH (None: not found)."""
    if "/" in program:
        path = Path(program)
        return path.resolve() if path.is_file() else None
    found = shutil.which(program)
    return Path(found).resolve() if found else None


@dataclass(frozen=True)
class JobRecord:
    """What the job measured; `record_text` is its artifact, canonical JSON (sorted keys) so its hash is stable."""

    cfg_sha256: str
    engine_binary: str = ""  # the KataGo named on the command line (engine.binary=); "": the runtime config's
    engine_binary_sha256: str = ""
    engine_model: str = ""  # the model named on the command line (engine.model=); "": the runtime config's
    serving_changes: list[dict[str, Any]] = field(default_factory=list)  # kgbench.targets.serving's changes

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "cfg_sha256": self.cfg_sha256,
            "engine": {
                "binary": self.engine_binary,
                "binary_sha256": self.engine_binary_sha256,
                "model": self.engine_model,
            },
            "serving_changes": self.serving_changes,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobRecord:
        """The record of an artifact's JSON; ValueError on any other shape."""
        if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
            raise ValueError(f"not a kgbench record of schema {SCHEMA}")
        engine = data.get("engine")
        changes = data.get("serving_changes")
        cfg = data.get("cfg_sha256")
        if not isinstance(engine, Mapping) or not isinstance(changes, list) or not isinstance(cfg, str):
            raise ValueError("a kgbench record needs cfg_sha256, engine and serving_changes")
        values = {k: engine.get(k, "") for k in ("binary", "binary_sha256", "model")}
        if not all(isinstance(v, str) for v in values.values()) or not all(isinstance(c, dict) for c in changes):
            raise ValueError("a kgbench record's engine values are strings, its serving changes mappings")
        return cls(cfg, values["binary"], values["binary_sha256"], values["model"], list(changes))


def record_text(record: JobRecord) -> str:
    return json.dumps(record.as_dict(), sort_keys=True, indent=1) + "\n"


def log_job_record(client: MlflowClient, run_id: str, record: JobRecord, folder: Path) -> Path:
    """Pin `record` to a run, as a job does at measure time: FOLDER/kgbench_record.json written, its sha256 and the
    cfg's logged as the run's params (one batch), the file logged as the run's artifact. Returns the file."""
    # imported here: the light readers of this module (summary's param names, promote's digests) need no mlflow
    from mlflow.entities import Param

    text = record_text(record)
    path = folder / RECORD_ARTIFACT
    path.write_text(text, encoding="utf-8")
    params = [Param(RECORD_SHA256_PARAM, text_sha256(text)), Param(CFG_SHA256_PARAM, record.cfg_sha256)]
    client.log_batch(run_id, params=params)
    client.log_artifact(run_id, str(path))
    return path
