"""What kgserve reads of a KataGo network file: its model name, and whether it is a synthetic net.

A synthetic net (written by `python -m kgbench.nets synth`) has a real architecture and random weights: it costs the
GPU what the real net costs, but its analyses are noise. Its model name (the file's first token, which KataGo also
reports as the model's internal name) starts with SYNTHETIC_PREFIX; kgserve serves one only when told the run is a
throughput test.
"""

from __future__ import annotations

import gzip
from pathlib import Path

__all__ = ["SYNTHETIC_PREFIX", "is_synthetic_model", "read_model_name"]

SYNTHETIC_PREFIX = "synthetic-"
_GZIP_MAGIC = b"\x1f\x8b"


def read_model_name(path: Path) -> str:
    """The model's name: the first token of the (maybe gzipped) file, read without reading the rest."""
    with path.open("rb") as f:
        gzipped = f.read(2) == _GZIP_MAGIC
    with gzip.open(path, "rb") if gzipped else path.open("rb") as f:
        head = f.read(256)
    tokens = head.split(maxsplit=1)
    return tokens[0].decode("ascii", errors="backslashreplace") if tokens else ""


def is_synthetic_model(path: Path) -> bool:
    try:
        return read_model_name(path).startswith(SYNTHETIC_PREFIX)
    except (OSError, EOFError):
        return False  # an unreadable file is the engine's to report, not this check's
