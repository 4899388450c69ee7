"""Writing what promote decided: atomic file replacement, the engine.backend line of runtime/config.yaml
(every comment and every other byte kept), and a unified diff for the terminal. Pure text functions
plus one atomic write; no MLflow here."""

from __future__ import annotations

import difflib
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import yaml

__all__ = ["atomic_write_text", "set_engine_backend", "unified_diff"]

_TOP_KEY_RE = re.compile(r"^(?P<key>[A-Za-z_][\w-]*)\s*:(?P<rest>.*)$")
_BACKEND_NAME_RE = re.compile(r"^[A-Za-z0-9_-]+$")


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write `text` to a temporary file next to `path`, fsync it, then os.replace it over `path`
    (readers see the old file or the new one, never a half-written one). Keeps the old file's mode."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if target.exists():
            os.chmod(tmp_name, target.stat().st_mode & 0o7777)
        else:
            os.chmod(tmp_name, 0o644)
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def set_engine_backend(text: str, backend: str) -> str:
    """Return config.yaml text with `engine.backend` set to `backend`. Only the value on that one line
    changes: comments, spacing and key order stay byte for byte. Raises ValueError when the key is
    not found as a plain `backend: value` line, or when the result would not parse back as intended."""
    if not _BACKEND_NAME_RE.match(backend):
        raise ValueError(f"invalid backend name {backend!r}")
    lines = text.splitlines(keepends=True)
    start = next(
        (i for i, ln in enumerate(lines) if (m := _TOP_KEY_RE.match(ln)) and m.group("key") == "engine"),
        None,
    )
    if start is None:
        raise ValueError("no top-level `engine:` mapping in the configuration")
    child_indent: int | None = None
    target: int | None = None
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if not _is_content(line):
            continue
        indent = _indent(line)
        if indent == 0:
            break  # next top-level key
        if child_indent is None:
            child_indent = indent
        if indent == child_indent and re.match(r"^\s*backend\s*:", line):
            target = i
            break
    if target is None:
        raise ValueError("no `backend:` key directly under `engine:` in the configuration")
    match = re.match(
        r"^(?P<head>[ \t]*backend[ \t]*:[ \t]*)(?P<value>[^#\r\n]*?)(?P<tail>[ \t]*(#.*)?)(?P<eol>\r?\n?)$",
        lines[target],
    )
    if match is None:
        raise ValueError(f"cannot edit the engine.backend line: {lines[target]!r}")
    tail = match.group("tail")
    if not match.group("value") and tail.startswith("#"):
        tail = " " + tail
    head = match.group("head")
    if not head.endswith((" ", "\t")):
        head += " "
    lines[target] = head + backend + tail + match.group("eol")
    new_text = "".join(lines)
    _check_only_backend_changed(text, new_text, backend)
    return new_text


def _check_only_backend_changed(old: str, new: str, backend: str) -> None:
    try:
        before: Any = yaml.safe_load(old)
        after: Any = yaml.safe_load(new)
    except yaml.YAMLError as exc:
        raise ValueError(f"the edited configuration would not parse: {exc}") from exc
    if not isinstance(after, dict) or after.get("engine", {}).get("backend") != backend:
        raise ValueError("editing engine.backend did not take effect; configuration left unchanged")
    before["engine"]["backend"] = backend
    if before != after:
        raise ValueError("editing engine.backend changed other settings; configuration left unchanged")


def unified_diff(old: str, new: str, old_name: str, new_name: str) -> str:
    """A unified diff of two texts ("" when equal)."""
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=old_name, tofile=new_name
        )
    )
