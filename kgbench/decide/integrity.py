"""What promote may write, checked against what the job recorded at measure time (kgbench.track.record).

`measured_record` downloads a run's `kgbench_record.json` and `katago.cfg` artifacts and checks them against the
run's params (immutable in MLflow, unlike its tags): the record's sha256 must be the `kgbench.record_sha256` param,
the cfg's the record's and the `kgbench.cfg_sha256` param's. An edited artifact is refused, naming the difference
(the cfg keys whose values are not the `katago.*` params the job logged). `checked_binary` checks a KataGo a runtime
is about to run: the file the job recorded, with the same sha256, and `katago version` answers.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from kgbench.track.record import (
    CFG_SHA256_PARAM,
    RECORD_ARTIFACT,
    RECORD_SHA256_PARAM,
    JobRecord,
    file_sha256,
    text_sha256,
)
from kgbench.track.store_errors import describe
from kgserve.katago.cfg import parse_cfg_text

__all__ = ["CFG_ARTIFACT", "IntegrityError", "Measured", "cfg_differences", "checked_binary", "measured_record"]

CFG_ARTIFACT = "katago.cfg"
_PARAM_PREFIX = "katago."
_VERSION_TIMEOUT_S = 60.0
_NAMED = 6  # differences named in a refusal


class IntegrityError(Exception):
    """An artifact or a binary is not what the job recorded; the message names the difference."""


@dataclass(frozen=True)
class Measured:
    record: JobRecord
    cfg_text: str  # the katago.cfg artifact, checked against the record


def _download(client: MlflowClient, run_id: str, name: str, folder: str) -> bytes:
    try:
        return Path(client.download_artifacts(run_id, name, folder)).read_bytes()
    except Exception as exc:  # MlflowException / OSError: the artifact is missing
        why = describe(exc) or " ".join(str(exc).split())[:300]
        raise IntegrityError(f"run {run_id} has no {name} artifact to promote: {why}") from exc


def cfg_differences(cfg_text: str, params: Mapping[str, str]) -> list[str]:
    """The cfg's keys whose values are not the job's `katago.*` params (added, removed or changed), in key order."""
    keys = parse_cfg_text(cfg_text)
    logged = {k.removeprefix(_PARAM_PREFIX): v for k, v in params.items() if k.startswith(_PARAM_PREFIX)}
    found = []
    for key in sorted(set(keys) | set(logged)):
        if key not in logged:
            found.append(f"{key} = {keys[key]} added")
        elif key not in keys:
            found.append(f"{key} removed (measured {logged[key]})")
        elif keys[key].strip() != str(logged[key]).strip():
            found.append(f"{key} {logged[key]} -> {keys[key]}")
    return found


def measured_record(client: MlflowClient, run: Run) -> Measured:
    """The run's record and cfg as its job recorded them, or IntegrityError naming what no longer matches."""
    run_id, params = run.info.run_id, run.data.params
    pinned = params.get(RECORD_SHA256_PARAM)
    if not pinned:
        raise IntegrityError(
            f"run {run_id} has no integrity record (param {RECORD_SHA256_PARAM}): it was recorded before kgbench "
            "kept one, or not by kgbench; re-run its job to promote it"
        )
    with tempfile.TemporaryDirectory(prefix="kgbench-promote-") as tmp:
        raw = _download(client, run_id, RECORD_ARTIFACT, tmp)
        cfg = _download(client, run_id, CFG_ARTIFACT, tmp)
    if text_sha256(raw) != pinned:
        raise IntegrityError(
            f"run {run_id}'s {RECORD_ARTIFACT} was changed after its job: sha256 {text_sha256(raw)[:12]}, the job "
            f"recorded {pinned[:12]} ({RECORD_SHA256_PARAM}); nothing promoted"
        )
    try:
        record = JobRecord.from_dict(json.loads(raw))
    except ValueError as exc:
        raise IntegrityError(f"run {run_id}'s {RECORD_ARTIFACT} is unreadable: {exc}") from exc
    if record.cfg_sha256 != params.get(CFG_SHA256_PARAM):
        raise IntegrityError(f"run {run_id}'s record and its {CFG_SHA256_PARAM} param disagree; nothing promoted")
    actual = text_sha256(cfg)
    if actual != record.cfg_sha256:
        text = cfg.decode("utf-8", errors="replace")
        named = cfg_differences(text, params)
        what = "; ".join(named[:_NAMED]) + (f" and {len(named) - _NAMED} more" if len(named) > _NAMED else "")
        raise IntegrityError(
            f"run {run_id}'s {CFG_ARTIFACT} is not the cfg its job measured (sha256 {actual[:12]}, recorded "
            f"{record.cfg_sha256[:12]}): {what or 'its comments or layout changed'}; nothing promoted"
        )
    return Measured(record, cfg.decode("utf-8"))


def checked_binary(record: JobRecord) -> str:
    """`<path> (sha256 <12 hex>, <katago version's first line>)` for the KataGo the job recorded, after checking the
    file is the one it measured and that it runs; IntegrityError otherwise."""
    path = Path(record.engine_binary)
    if not path.is_file():
        raise IntegrityError(f"the KataGo the job ran, {path}, is not there any more; nothing promoted")
    actual = file_sha256(path)
    if actual != record.engine_binary_sha256:
        raise IntegrityError(
            f"{path} is not the KataGo the job measured: sha256 {actual[:12]}, recorded "
            f"{record.engine_binary_sha256[:12]}; nothing promoted"
        )
    try:
        proc = subprocess.run(
            [str(path), "version"], capture_output=True, text=True, timeout=_VERSION_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise IntegrityError(f"`{path} version` does not run: {exc}; nothing promoted") from exc
    first = next((ln.strip() for ln in proc.stdout.splitlines() if ln.strip()), "")
    if proc.returncode != 0 or not first:
        raise IntegrityError(f"`{path} version` exited {proc.returncode} without a version; nothing promoted")
    return f"{path} (sha256 {actual[:12]}, {first})"
