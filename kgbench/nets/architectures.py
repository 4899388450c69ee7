"""Named network architectures a synthetic net can be written in (layouts from KataGo's `modelconfigs.py`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ARCHITECTURES", "Architecture", "architecture"]


@dataclass(frozen=True)
class Architecture:
    """A nested-bottleneck ("nbt") residual net: each block is 1x1 trunk->mid, two inner residual blocks of two 3x3
    convolutions at mid channels (the first with global pooling in a `gpool` block), 1x1 mid->trunk."""

    name: str
    trunk: int
    mid: int
    gpool: int
    gpool_blocks: tuple[bool, ...]  # one per block: does its first inner block pool globally
    p1: int  # policy head channels
    g1: int  # policy head global-pooling channels
    v1: int  # value head channels
    v2: int  # value head hidden size
    activation: str = "ACTIVATION_MISH"  # what kata1's main nets use ("-mish"); the cost differs little from relu
    version: int = 15

    @property
    def num_blocks(self) -> int:
        return len(self.gpool_blocks)


def _every_third(count: int) -> tuple[bool, ...]:
    return tuple(i % 3 == 0 for i in range(1, count + 1))


ARCHITECTURES: dict[str, Architecture] = {
    arch.name: arch
    for arch in (
        # the pinned production architecture (kata1-zhizi-b40c768nbt), KataGo's "historic katago/zhizi architecture"
        Architecture("b40c768nbt", 768, 384, 128, _every_third(40), p1=128, g1=128, v1=256, v2=256),
        # the strongest official kata1 convnet
        Architecture("b28c512nbt", 512, 256, 64, _every_third(28), p1=64, g1=64, v1=128, v2=144),
        # "recommended best config for this cost"
        Architecture("b18c384nbt", 384, 192, 64, (*_every_third(15), False, False, False), p1=48, g1=48, v1=96, v2=128),
        # a tiny net for tests: loads and answers in milliseconds on the CPU build
        Architecture("b2c32nbt", 32, 16, 8, (False, True), p1=8, g1=8, v1=16, v2=16),
    )
}


def architecture(name: str) -> Architecture:
    try:
        return ARCHITECTURES[name]
    except KeyError:
        known = ", ".join(ARCHITECTURES)
        raise ValueError(f"unknown architecture {name!r}; known: {known}") from None
