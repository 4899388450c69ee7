"""Replacing a file all at once: readers (kgserve at start, a shell script, promote's verify) see the old file or the
new one, never a half-written one, and a full disk or a crash leaves the old file whole. Used by kgserve's
`runtime_config pin` (fetch_katago.sh's checksums) and by kgbench's promote (its runtime files)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["write_text_atomic"]

NEW_FILE_MODE = 0o644  # a file that did not exist yet; an existing file keeps its own mode bits


def write_text_atomic(path: str | Path, text: str, check: Callable[[str], object] | None = None) -> None:
    """Write `text` to a temporary file beside `path`, fsync it, give it `path`'s mode (0o644 for a new file), call
    `check(temporary_path)` if given (it raises to refuse the new text), then os.replace it over `path`. On any
    failure the temporary file is removed and the exception goes on, `path` untouched."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, target.stat().st_mode & 0o7777 if target.exists() else NEW_FILE_MODE)
        if check is not None:
            check(tmp_name)
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
