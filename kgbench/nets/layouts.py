"""Which known layout a real network file is: the one `synth` can write and the sim's profiles stand for, or none.

A file matches a layout when its blocks, trunk and mid channels, attention layers and parameter count all equal those
of a synthetic net of that layout (``architectures.PARAMS``). No near match is offered: a file that matches none
is a layout this project does not know, and is said to be so (docs/runbook.md, "Re-pinning KataGo and the network").
"""

from __future__ import annotations

from kgbench.nets.architectures import ARCHITECTURES, PARAMS, Architecture
from kgbench.nets.description import NetDescription

__all__ = ["known_layout", "layout_line"]


def _attention_layers(arch: Architecture) -> int:
    return arch.num_blocks * arch.transformer.pairs if arch.transformer is not None else 0


def known_layout(net: NetDescription) -> str | None:
    for name, arch in ARCHITECTURES.items():
        if (
            PARAMS.get(name) == net.params
            and arch.num_blocks == len(net.block_kinds)
            and arch.trunk == net.trunk_channels
            and arch.mid == net.mid_channels
            and _attention_layers(arch) == net.attention_layers
        ):
            return name
    return None


def layout_line(net: NetDescription) -> str:
    """One line for a person: the layout's name, or that no known layout is this file's."""
    name = known_layout(net)
    if name is not None:
        return f"  layout: {name} (`python -m kgbench.nets synth {name}` writes its twin)"
    return (
        f"  layout: NOT one kgbench.nets synth knows ({net.architecture}, {net.params:,} params): synth writes no twin "
        "of it and no figure derived for a known layout is this file's; measure it (docs/qualify.md)"
    )
