"""KataGo network files: read (architecture, weights, FLOPs per evaluation) and written (synthetic nets).

`python -m kgbench.nets flops MODEL`, `python -m kgbench.nets synth ARCH OUT`, `python -m kgbench.nets katrain`.
"""

from kgbench.nets.architectures import ARCHITECTURES, PINNED_ARCHITECTURE, Architecture, Transformer, architecture
from kgbench.nets.description import Layer, NetDescription
from kgbench.nets.parse import describe_model
from kgbench.nets.stream import ModelFormatError
from kgbench.nets.synth import synthetic_model_name, write_synthetic
from kgserve.katago.netfile import (
    KATRAIN_NET_FILE,
    SYNTHETIC_PREFIX,
    KatrainNetMissing,
    is_synthetic_model,
    katrain_model_path,
    read_model_name,
)

__all__ = [
    "ARCHITECTURES",
    "KATRAIN_NET_FILE",
    "PINNED_ARCHITECTURE",
    "SYNTHETIC_PREFIX",
    "Architecture",
    "KatrainNetMissing",
    "Layer",
    "ModelFormatError",
    "NetDescription",
    "Transformer",
    "architecture",
    "describe_model",
    "is_synthetic_model",
    "katrain_model_path",
    "read_model_name",
    "synthetic_model_name",
    "write_synthetic",
]
