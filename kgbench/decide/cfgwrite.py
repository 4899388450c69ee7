"""Writing what promote decided: atomic file replacement under the runtime's lock, the engine.backend and
engine.processes lines of runtime/config.yaml (every comment and every other byte kept), and a unified diff for the
terminal. Pure text functions plus the runtime's all-or-none writes (kgserve.atomicfile's); no MLflow here."""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from kgserve.atomicfile import write_text_atomic

__all__ = [
    "LOCK_NAME",
    "FileSwap",
    "RuntimeBusy",
    "runtime_lock",
    "set_engine_backend",
    "set_engine_value",
    "unified_diff",
]

LOCK_NAME = ".promote.lock"  # in the runtime's folder: one promote at a time writes its files
_LOCK_POLL_S = 0.2


class RuntimeBusy(Exception):
    """Another promote held the runtime's lock for longer than this one would wait."""


@contextlib.contextmanager
def runtime_lock(directory: Path, wait_s: float) -> Iterator[None]:
    """Hold an exclusive lock (fcntl.flock) on DIRECTORY/.promote.lock; wait up to `wait_s` for another promote to
    finish, then RuntimeBusy. The kernel drops the lock when its holder dies, killed or not: no stale lock."""
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise RuntimeBusy(
                        f"another promote is writing {directory} (it holds {directory / LOCK_NAME}); waited "
                        f"{wait_s:g} s: nothing written"
                    ) from None
                time.sleep(_LOCK_POLL_S)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


_TOP_KEY_RE = re.compile(r"^(?P<key>[A-Za-z_][\w-]*)\s*:(?P<rest>.*)$")
_BACKEND_NAME_RE = re.compile(r"^[A-Za-z0-9_-]+$")


class FileSwap:
    """Files replaced all or none, and put back on demand: each old file is kept as a hard link beside it before its
    replacement, so putting it back is a rename that needs no free space (the disk that refused the second file, or
    the store that refused the run's tag, may be full). `keep()` drops the kept copies once everything agreed."""

    def __init__(self) -> None:
        self._done: list[tuple[Path, Path | None]] = []  # (file, its old copy; None: there was none)

    def write(self, path: Path, text: str) -> None:
        """Replace `path` with `text` (write_text_atomic); if that fails, everything written so far is put back."""
        kept: Path | None = None
        if path.exists():
            kept = path.with_name(f".{path.name}.kgbench-old")
            kept.unlink(missing_ok=True)
            os.link(path, kept)
        try:
            write_text_atomic(path, text)
        except BaseException:
            if kept is not None:
                kept.unlink(missing_ok=True)
            self.undo()
            raise
        self._done.append((path, kept))

    def undo(self) -> None:
        """Every written file as it was before (a new file removed)."""
        for path, kept in reversed(self._done):
            if kept is None:
                path.unlink(missing_ok=True)
            else:
                os.replace(kept, path)
        self._done.clear()

    def keep(self) -> None:
        for _, kept in self._done:
            if kept is not None:
                kept.unlink(missing_ok=True)
        self._done.clear()


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
    return set_engine_value(text, "backend", backend)


def _scalar(value: str | int) -> str:
    """The YAML text of a value: a string YAML would read as something else (digits, `true`) quoted."""
    if isinstance(value, str) and yaml.safe_load(value) != value:
        return json.dumps(value)
    return str(value)


def set_engine_value(text: str, key: str, value: str | int) -> str:
    """Return config.yaml text with `engine.<key>` set to `value` (a name or a number). Only that line changes
    (comments, spacing and key order stay byte for byte); a key the engine mapping lacks is added under its
    `backend:` line. Raises ValueError when it cannot be edited so, or when the result would not parse back as
    intended (no other setting may change)."""
    lines = text.splitlines(keepends=True)
    start = next(
        (i for i, ln in enumerate(lines) if (m := _TOP_KEY_RE.match(ln)) and m.group("key") == "engine"),
        None,
    )
    if start is None:
        raise ValueError("no top-level `engine:` mapping in the configuration")
    child_indent: int | None = None
    found: dict[str, int] = {}
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if not _is_content(line):
            continue
        indent = _indent(line)
        if indent == 0:
            break  # next top-level key
        if child_indent is None:
            child_indent = indent
        if indent == child_indent and (m := re.match(r"^\s*([A-Za-z_][\w-]*)\s*:", line)):
            found.setdefault(m.group(1), i)
    if key in found:
        lines[found[key]] = _with_value(lines[found[key]], key, value)
    elif "backend" in found and child_indent is not None:
        eol = "\r\n" if lines[found["backend"]].endswith("\r\n") else "\n"
        lines.insert(found["backend"] + 1, f"{' ' * child_indent}{key}: {_scalar(value)}{eol}")
    else:
        where = "" if key == "backend" else " (nor a `backend:` line to add it under)"
        raise ValueError(f"no `{key}:` key directly under `engine:`{where} in the configuration")
    new_text = "".join(lines)
    _check_only_key_changed(text, new_text, key, value)
    return new_text


def _with_value(line: str, key: str, value: str | int) -> str:
    match = re.match(
        rf"^(?P<head>[ \t]*{re.escape(key)}[ \t]*:[ \t]*)(?P<value>[^#\r\n]*?)(?P<tail>[ \t]*(#.*)?)(?P<eol>\r?\n?)$",
        line,
    )
    if match is None:
        raise ValueError(f"cannot edit the engine.{key} line: {line!r}")
    tail = match.group("tail")
    if not match.group("value") and tail.startswith("#"):
        tail = " " + tail
    head = match.group("head")
    if not head.endswith((" ", "\t")):
        head += " "
    return head + _scalar(value) + tail + match.group("eol")


def _check_only_key_changed(old: str, new: str, key: str, value: str | int) -> None:
    try:
        before: Any = yaml.safe_load(old)
        after: Any = yaml.safe_load(new)
    except yaml.YAMLError as exc:
        raise ValueError(f"the edited configuration would not parse: {exc}") from exc
    if not isinstance(after, dict) or after.get("engine", {}).get(key) != value:
        raise ValueError(f"editing engine.{key} did not take effect; configuration left unchanged")
    before["engine"][key] = value
    if before != after:
        raise ValueError(f"editing engine.{key} changed other settings; configuration left unchanged")


def unified_diff(old: str, new: str, old_name: str, new_name: str) -> str:
    """A unified diff of two texts ("" when equal)."""
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=old_name, tofile=new_name
        )
    )
