"""What kgserve reads of a KataGo network file: its model name, and whether it is a synthetic net.

A synthetic net (written by `python -m kgbench.nets synth`) has a real architecture and random weights: it costs the
GPU what the real net costs, but its analyses are noise. Its model name (the file's first token, which KataGo also
reports as the model's internal name) starts with SYNTHETIC_PREFIX; kgserve serves one only when told the run is a
throughput test.
"""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

__all__ = [
    "KATRAIN_NET",
    "KATRAIN_NET_FILE",
    "SYNTHETIC_PREFIX",
    "KatrainNetMissing",
    "is_synthetic_model",
    "katrain_model_path",
    "read_model_name",
]

SYNTHETIC_PREFIX = "synthetic-"
KATRAIN_NET = "katrain"  # the word that names the KaTrain net wherever a model file is asked for
KATRAIN_NET_FILE = "b10c384h6nbttflrs.bin.gz"  # katrain 1.20: 10 nested-bottleneck transformer blocks, 384 channels
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


class KatrainNetMissing(RuntimeError):
    """The `katrain` package (or its bundled net) is not installed."""


def katrain_model_path() -> Path:
    """Where the installed `katrain` package keeps its network: the realistic net at hand offline. The package is
    found, never imported (importing KaTrain pulls in kivy)."""
    spec = importlib.util.find_spec("katrain")
    if spec is None or not spec.submodule_search_locations:
        raise KatrainNetMissing(
            "the KaTrain net needs the `katrain` package: pip install -e '.[katrain]' (the project's katrain extra)"
        )
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "models" / KATRAIN_NET_FILE
        if path.is_file():
            return path
    raise KatrainNetMissing(
        f"the installed katrain package has no models/{KATRAIN_NET_FILE} (katrain >= 1.20 ships it): "
        "pip install -e '.[katrain]'"
    )
