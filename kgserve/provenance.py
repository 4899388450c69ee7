"""Where the served KataGo cfg came from: the `# kgbench-promote:` header of runtime/katago_serving.cfg.

`python -m kgbench.promote` writes the cfg as a header followed by the body (the rendered cfg of the
winning MLflow run)::

    # kgbench-promote: run_id = 0123abcd...
    # kgbench-promote: sweep_id = 2026-11-22_07-30-00
    # kgbench-promote: backend = trt
    ...
    # kgbench-promote: content_sha256 = <sha256 of the body below the header>
    <body>

kgserve reads it back with `read_provenance(path)` to log (and show in /readyz) which run it serves, and
to warn when the body was edited by hand after promotion (`Provenance.modified`).

Pure functions, standard library only: kgserve must never import mlflow.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "HASH_KEY",
    "HEADER_PREFIX",
    "Provenance",
    "body_sha256",
    "parse_provenance",
    "read_provenance",
    "render_header",
    "split_header",
]

HEADER_PREFIX = "# kgbench-promote:"
HASH_KEY = "content_sha256"
_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_TRUE = {"true", "1", "yes"}


def body_sha256(body: str) -> str:
    """sha256 (hex) of the cfg body exactly as written below the header (UTF-8)."""
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def _one_line(value: str) -> str:
    return " ".join(str(value).split())


def render_header(fields: Mapping[str, str], body: str) -> str:
    """The full file text: one `# kgbench-promote: key = value` line per field, then `content_sha256`,
    then the body verbatim. Values are flattened to one line; a `content_sha256` in `fields` is ignored
    (it is always computed from `body`). Raises ValueError on a key that is not a plain identifier."""
    lines: list[str] = []
    for key, value in fields.items():
        if key == HASH_KEY:
            continue
        if not _KEY_RE.match(key):
            raise ValueError(f"invalid provenance key {key!r}")
        lines.append(f"{HEADER_PREFIX} {key} = {_one_line(value)}\n")
    lines.append(f"{HEADER_PREFIX} {HASH_KEY} = {body_sha256(body)}\n")
    return "".join(lines) + body


def split_header(text: str) -> tuple[dict[str, str], str]:
    """Split file text into (header fields, body). The header is the leading run of lines starting
    with HEADER_PREFIX; lines of it without ` = ` are ignored. No header -> ({}, text)."""
    fields: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        end = text.find("\n", pos)
        stop = len(text) if end < 0 else end + 1
        line = text[pos:stop].rstrip("\r\n")
        if not line.startswith(HEADER_PREFIX):
            break
        key, sep, value = line[len(HEADER_PREFIX) :].partition("=")
        if sep and key.strip():
            fields[key.strip()] = value.strip()
        pos = stop
    return fields, text[pos:]


@dataclass(frozen=True)
class Provenance:
    """The promote header of a cfg. `fields` holds every header value as written (strings)."""

    fields: dict[str, str]
    modified: bool  # the body no longer matches content_sha256 (edited by hand after promotion)
    path: str = ""
    actual_sha256: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.fields.get(key, default)

    @property
    def run_id(self) -> str | None:
        return self.fields.get("run_id")

    @property
    def sweep_id(self) -> str | None:
        return self.fields.get("sweep_id")

    @property
    def backend(self) -> str | None:
        return self.fields.get("backend")

    @property
    def content_sha256(self) -> str | None:
        return self.fields.get(HASH_KEY)

    @property
    def simulated(self) -> bool:
        return self.fields.get("simulated", "false").strip().lower() in _TRUE

    def warning(self) -> str | None:
        """One line for kgserve's start-up log when the cfg was edited after promotion, else None."""
        if not self.modified:
            return None
        return (
            f"{self.path or 'cfg'} was edited after promotion (run {self.run_id}): its content sha256 "
            f"{self.actual_sha256[:12]} no longer matches the header's {str(self.content_sha256)[:12]}; "
            "the served cfg is not the benchmarked one"
        )

    def summary(self) -> str:
        """One line for kgserve's start-up log."""
        parts = [f"run {self.run_id}", f"sweep {self.sweep_id}", f"backend {self.backend}"]
        for key in ("req_per_s", "p99_ms", "date"):
            if key in self.fields:
                parts.append(f"{key} {self.fields[key]}")
        text = "cfg promoted from " + ", ".join(parts)
        if self.simulated:
            text += " [SIMULATED: numbers from the simulated engine]"
        if self.modified:
            text += " [MODIFIED since promotion]"
        return text

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: every header field, plus `simulated` (bool), `modified` (bool) and `cfg` (path)."""
        out: dict[str, Any] = dict(self.fields)
        out["simulated"] = self.simulated
        out["modified"] = self.modified
        if self.path:
            out["cfg"] = self.path
        return out


def parse_provenance(text: str, path: str = "") -> Provenance | None:
    """Provenance of cfg text, or None when it carries no promote header."""
    fields, body = split_header(text)
    if not fields:
        return None
    actual = body_sha256(body)
    expected = fields.get(HASH_KEY)
    return Provenance(fields=fields, modified=expected != actual, path=path, actual_sha256=actual)


def read_provenance(cfg_path: str | Path) -> Provenance | None:
    """Provenance of the cfg file, or None when the file is missing/unreadable or has no header."""
    path = Path(cfg_path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return parse_provenance(text, str(path))
