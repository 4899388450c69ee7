"""The serving settings inside a measurement: a job's kgserve serves with the settings of the runtime it will be
promoted into, except what its load generator needs, and a served runtime is compared with what a job measured.

A job's kgserve config is the runtime config's, with the job's cfg, backend and engine count (what promote writes),
and these load-generator changes only (`for_load_generator`), each recorded with its reason (`Change`):
- `server.host` 127.0.0.1 and `server.port` 0: the load generator connects over loopback to a free port;
- `server.auth_token_env` off: the load generator presents no token.
Nothing else: every limit is the runtime's, at any level (issue 40). The load generator is ONE client (one address,
no token, up to its highest level of queries in flight, each on a connection of its own), the shape of the bulk
client this tool's users run; kgserve's per-client caps, pacing and shares are work-conserving (they engage only
among clients that contend: docs/http-limits.md), so a lone client is neither refused nor slowed by them, and the
figure a job measures is the figure the promoted runtime serves to that client. (Until issue 40 a job widened
`limits.max_inflight_per_client` and `limits.max_connections_per_client` to its load and lifted
`limits.max_requests_per_s_per_client`: it measured a client the served runtime refused; such a run's recorded
changes are still read back and named by promote and `--verify`.)
Everything else (the thread reserve, admission, the memory budget and its per-client share, priority classes,
workers, timeouts, liveness) is the runtime's too. `transport=direct` sends the queries into the engine pool in
kgbench's own process, as one client (kgbench.load.senders.DirectSender): the engine settings (its thread reserve
included) apply, kgserve's front end (admission, caps, priority classes, workers, HTTP timeouts) is not in the
figure, and the job's record says so.

`serving_settings` is what is compared: every key of the sections kgserve serves with (server, engine, limits,
websocket, priority), less where the engine's files are (the cfg is promoted itself; binaries and models are the
runtime's identity, kgbench.track.runtime_id). `engine.min_ready` counts as the engines that must be ready.
A job records them as MLflow params `serve.<key>` (JSON values) and its changes as a tag; promote and
`python -m kgbench.promote --verify` read them back (`recorded`) and name every served value that differs
(`differences`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from kgserve.settings import Settings

__all__ = [
    "PARAM_PREFIX",
    "SECTIONS",
    "Change",
    "Difference",
    "apply_serving",
    "changes_from_json",
    "changes_json",
    "differences",
    "for_load_generator",
    "front_end_note",
    "recorded",
    "serving_line",
    "serving_params",
    "serving_settings",
]

PARAM_PREFIX = "serve."
SECTIONS = ("server", "engine", "limits", "websocket", "priority")
# where the engine's files are: the cfg is promoted itself, binaries and models are the runtime's identity
_FILES = frozenset({"engine.cfg", "engine.model", "engine.home_data_dir", "engine.backends",
                    "engine.cfg_run_id", "engine.cfg_sha256"})  # fmt: skip  # the last two: which cfg, not how
# kgserve's front end: not in a transport=direct figure
FRONT_END = ("server", "limits", "websocket", "priority")


@dataclass(frozen=True, slots=True)
class Change:
    """A serving setting the job's kgserve ran with instead of the runtime's, because its load generator needs it."""

    key: str
    runtime: Any  # the runtime's value: what promote writes and kgserve serves
    measured: Any  # the job's kgserve's
    why: str

    def text(self) -> str:
        return f"{self.key} {_shown(self.measured)} (runtime: {_shown(self.runtime)}; {self.why})"


@dataclass(frozen=True, slots=True)
class Difference:
    """A served value that is not the measured one; `why` says which load-generator change it is, if it is one."""

    key: str
    served: Any
    measured: Any
    why: str = ""

    def text(self) -> str:
        because = f": {self.why}" if self.why else ""
        return f"{self.key} {_shown(self.served)} (measured: {_shown(self.measured)}{because})"


def _shown(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def serving_settings(settings: Settings | Mapping[str, Any]) -> dict[str, Any]:
    """The settings kgserve serves with, as `section.key` -> value (JSON types), files left out."""
    if isinstance(settings, Settings):
        data: Mapping[str, Any] = settings.model_dump(mode="json")
        ready = settings.engine.required_ready
    else:
        data = settings
        engine = data.get("engine") or {}
        processes = int(engine.get("processes", 1))
        ready = min(int(engine.get("min_ready") or processes), processes)
    out: dict[str, Any] = {}
    for section in SECTIONS:
        for key, value in (data.get(section) or {}).items():
            name = f"{section}.{key}"
            if name not in _FILES:
                out[name] = value
    out["engine.min_ready"] = ready
    return out


def for_load_generator(data: dict[str, Any]) -> list[Change]:
    """Turn a runtime's kgserve config (Settings.model_dump) into the one its load generator measures, in place:
    its connection only (loopback, a free port, no token), every limit the runtime's; the changes, each with why."""
    changes: list[Change] = []

    def put(section: str, key: str, value: Any, why: str) -> None:
        old = data.setdefault(section, {}).get(key)
        if old != value:
            data[section][key] = value
            changes.append(Change(f"{section}.{key}", old, value, why))

    put("server", "host", "127.0.0.1", "the load generator connects over loopback")
    put("server", "port", 0, "a free port for the load generator")
    put("server", "auth_token_env", None, "the load generator presents no token")
    return changes


def front_end_note(transport: str) -> str:
    """What a job's figure leaves out of the serving settings ('' when nothing)."""
    if transport != "direct":
        return ""
    sections = ", ".join(FRONT_END)
    return (
        f"transport=direct: the engines in kgbench's process; kgserve's front end ({sections}: admission, caps, "
        "priority classes, workers, HTTP timeouts) is not in the figure"
    )


def serving_line(changes: Iterable[Change], source: str, transport: str = "http") -> str:
    """The job's serving settings in one line: whose, and what its load generator changed."""
    shown = [c.text() for c in changes]
    line = f"the serving settings of {source}" + (f", except {'; '.join(shown)}" if shown else "")
    note = front_end_note(transport)
    return f"{line}; {note}" if note else line


def serving_params(settings: Mapping[str, Any]) -> dict[str, str]:
    """MLflow params of the measured serving settings: `serve.<key>` -> its JSON text."""
    return {PARAM_PREFIX + key: json.dumps(value) for key, value in settings.items()}


def recorded(params: Mapping[str, str]) -> dict[str, Any]:
    """The serving settings a job recorded (its `serve.*` params); {} for a run from before they were recorded."""
    out: dict[str, Any] = {}
    for name, text in params.items():
        if name.startswith(PARAM_PREFIX):
            try:
                out[name.removeprefix(PARAM_PREFIX)] = json.loads(text)
            except ValueError:
                out[name.removeprefix(PARAM_PREFIX)] = text
    return out


def changes_json(changes: Iterable[Change]) -> str:
    return json.dumps([asdict(c) for c in changes])


def changes_from_json(text: str | None) -> list[Change]:
    if not text:
        return []
    try:
        return [Change(**item) for item in json.loads(text)]
    except (ValueError, TypeError):
        return []


def differences(
    served: Mapping[str, Any], measured: Mapping[str, Any], changes: Iterable[Change] = (), transport: str = "http"
) -> list[Difference]:
    """Every served value that is not the measured one (keys either side lacks included), in key order; a
    load-generator change says so. transport=direct: the front end's keys were never measured, left out."""
    why = {c.key: c.why for c in changes}
    skipped = FRONT_END if transport == "direct" else ()
    out = []
    for key in sorted(set(served) | set(measured)):
        if key.split(".", 1)[0] in skipped:
            continue
        left, right = served.get(key), measured.get(key)
        if not _same(left, right):
            out.append(Difference(key, left, right, why.get(key, "")))
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    return bool(a == b)


def apply_serving(data: dict[str, Any], values: Mapping[str, Any]) -> None:
    """Write serving settings (`section.key` -> value) into a kgserve config dict (Settings.model_dump), in place;
    `engine.min_ready` (the engines that must be ready) back as a key: null when it is every engine."""
    for name, value in values.items():
        section, _, key = name.partition(".")
        if section not in SECTIONS or name in _FILES or not key:
            continue
        data.setdefault(section, {})[key] = value
    engine = data.get("engine") or {}
    if "engine.min_ready" in values:
        ready = values["engine.min_ready"]
        engine["min_ready"] = None if ready is None or int(ready) >= int(engine.get("processes", 1)) else ready
