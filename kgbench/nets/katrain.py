"""The KaTrain net: the realistic network that ships inside the `katrain` package (the project's `katrain` extra)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["KATRAIN_NET_FILE", "KatrainNetMissing", "katrain_model_path"]

KATRAIN_NET_FILE = "b10c384h6nbttflrs.bin.gz"  # katrain 1.20: 10 nested-bottleneck transformer blocks, 384 channels


class KatrainNetMissing(RuntimeError):
    """The `katrain` package (or its bundled net) is not installed."""


def katrain_model_path() -> Path:
    """Where the installed `katrain` package keeps its network; the package is found, never imported (importing
    KaTrain pulls in kivy)."""
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
        f"the installed katrain package has no models/{KATRAIN_NET_FILE} "
        "(katrain >= 1.20 ships it): pip install -e '.[katrain]'"
    )
