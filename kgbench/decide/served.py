"""The serving settings a promoted run was measured with, read back from its MLflow run, and what promote says
about the runtime it writes: the settings it serves against the measured ones (kgbench.targets.serving).

A run records its kgserve's settings as params `serve.<key>` and the load generator's changes as a tag
(kgbench.track.schema.SERVING_CHANGES). A scratch runtime is written with exactly those settings, the load
generator's changes undone (`runtime_values`); a runtime config promoted in place keeps its own settings (promote
edits only engine.backend and engine.processes), and promote's line names every served value that is not the
measured one (`served_clause`). A job's only changes are its load generator's connection (loopback, port, token):
a run of today served every limit as the runtime has it. A run from before issue 40 widened per-client caps and
lifted the per-client pacing for its one-client load; promote names those as limits the runtime serves narrower.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from mlflow.entities import Run
from pydantic import ValidationError

from kgbench.targets.serving import Change, Difference, changes_from_json, differences, recorded, serving_settings
from kgbench.track.schema import SERVING_CHANGES
from kgserve.settings import Settings

__all__ = ["MeasuredServing", "measured_serving", "served_clause", "served_of_text", "split_differences"]

# the load generator's own connection to its kgserve: never a reason to warn
_CONNECTION = frozenset({"server.host", "server.port", "server.auth_token_env"})


@dataclass(frozen=True)
class MeasuredServing:
    values: dict[str, Any]  # the serving settings the run's kgserve ran with ({}: not recorded, an older run)
    changes: list[Change] = field(default_factory=list)  # what its load generator needed instead of the runtime's
    transport: str = "http"

    @property
    def recorded(self) -> bool:
        return bool(self.values)

    def runtime_values(self) -> dict[str, Any]:
        """The settings the runtime had when the run measured it: the measured ones, the load generator's undone."""
        out = dict(self.values)
        out.update({c.key: c.runtime for c in self.changes if c.key in out})
        return out

    def engines(self, params: Mapping[str, str]) -> int | None:
        """The engine processes the run measured behind its kgserve."""
        value = self.values.get("engine.processes", params.get("engines"))
        try:
            return int(value) if value is not None else None
        except (TypeError, ValueError):
            return None


def measured_serving(run: Run, changes: list[dict[str, Any]] | None = None) -> MeasuredServing:
    """The settings the run measured: its `serve.*` params, and the load generator's changes from `changes` (the
    job's integrity record, kgbench.track.record: what promote writes) or else its tag (for reports only: a tag can
    be rewritten by anyone who may write to the store)."""
    params, tags = run.data.params, run.data.tags
    found = changes_from_json(json.dumps(changes) if changes is not None else tags.get(SERVING_CHANGES))
    return MeasuredServing(recorded(params), found, params.get("transport") or tags.get("transport", "http"))


def served_of_text(config_text: str) -> dict[str, Any] | None:
    """The serving settings of a runtime config's text (None when it does not validate)."""
    try:
        return serving_settings(Settings.model_validate(yaml.safe_load(config_text)))
    except (ValidationError, yaml.YAMLError, TypeError, ValueError):
        return None


def split_differences(
    served: Mapping[str, Any], measured: MeasuredServing
) -> tuple[list[Difference], list[Difference]]:
    """(settings that differ for no load-generator reason, the limits a run from before issue 40 widened for its
    load generator); the load generator's own connection (host, port, token) left out."""
    found = differences(served, measured.values, measured.changes, measured.transport)
    real = [d for d in found if not d.why]
    caps = [d for d in found if d.why and d.key not in _CONNECTION]
    return real, caps


def served_clause(served: Mapping[str, Any] | None, measured: MeasuredServing) -> str:
    """What promote's line says of the runtime it wrote: its serving settings against the measured ones."""
    if not measured.recorded:
        return "its serving settings were not recorded (a run from before kgbench recorded them): verify it"
    if served is None:
        return "the written runtime config does not validate"
    real, caps = split_differences(served, measured)
    direct = " (measured without kgserve's front end: transport=direct)" if measured.transport == "direct" else ""
    if real:
        named = "; ".join(d.text() for d in real[:4]) + (f" and {len(real) - 4} more" if len(real) > 4 else "")
        return f"SERVED SETTINGS DIFFER from the measured: {named}{direct}"
    if caps:
        named = "; ".join(d.text() for d in caps)
        return (
            f"SERVED LIMITS DIFFER from the measured{direct}: the job (a kgbench before issue 40) widened them for "
            f"its one-client load, the runtime serves them as written: {named}"
        )
    return f"serving settings as measured{direct}"
