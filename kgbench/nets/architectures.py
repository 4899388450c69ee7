"""Named network architectures a synthetic net can be written in (layouts from KataGo's `modelconfigs.py`).

Two families, both built of nested-bottleneck ("nbt") blocks (1x1 trunk->mid, an inner stack at mid channels,
1x1 mid->trunk):

- convolutional (`b40c768nbt`...): the inner stack is two residual blocks of two 3x3 convolutions, the first with
  global pooling in a `gpool` block;
- transformer (`b11c768h12nbt3tflrs-fson-silu`...): the inner stack alternates pre-norm attention and SwiGLU
  feed-forward blocks, `pairs` of each ("nbtt": 2, "nbt3t": 3), attention with learnable 2D RoPE ("lr"); no gpool.

KataGo's suffixes that change the file: `-silu` the activation, `-rsnh` a spatial RMSNorm before the heads (trunk norm
kind 1) instead of the batch norm; `-fson` (fixed scaling plus one batch norm) writes the same layers as a batch-norm
net with learned scales, so it changes no shape.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ARCHITECTURES",
    "PARAMS",
    "PINNED_ARCHITECTURE",
    "PINNED_LAYOUT_KNOWN",
    "PINNED_NETWORK",
    "Architecture",
    "Transformer",
    "architecture",
]

# the network runtime/config.yaml pins (docs/runbook.md, "Re-pinning KataGo and the network"), and whether its own
# layout is one synth knows. When it is, PINNED_ARCHITECTURE is that layout. When it is not (False: the pin's layout is
# published nowhere and its file was not read here; runtime/fetch_katago.sh describes it where it is fetched),
# PINNED_ARCHITECTURE is the nearest known layout of its family, which `synthetic:` nets and the sim's default profile
# stand for: not the pinned file's cost, and every report that uses it says so
PINNED_NETWORK = "kata1-tf3-b11c768-s11003M-d5973M-7gres"
PINNED_LAYOUT_KNOWN = False
PINNED_ARCHITECTURE = "b11c768h12nbt3tflrs-fson-silu"


@dataclass(frozen=True)
class Transformer:
    """The inner stack of a nested-bottleneck transformer block (KataGo's `bottlenest{2,3}transformerropesg`)."""

    heads: int
    ffn: int  # SwiGLU hidden channels
    pairs: int  # attention + feed-forward pairs per nested block
    kv_heads: int = 0  # 0: as many as `heads` (no grouped-query attention)
    learnable_rope: bool = True

    @property
    def num_kv_heads(self) -> int:
        return self.kv_heads or self.heads


@dataclass(frozen=True)
class Architecture:
    """A nested-bottleneck net: its trunk, the inner stack of its blocks, its heads and its file format."""

    name: str
    trunk: int
    mid: int
    gpool: int
    gpool_blocks: tuple[bool, ...]  # one per block: does its first inner block pool globally (transformers: never)
    p1: int  # policy head channels
    g1: int  # policy head global-pooling channels
    v1: int  # value head channels
    v2: int  # value head hidden size
    activation: str = "ACTIVATION_MISH"  # what kata1's main nets use ("-mish"); the cost differs little from relu
    version: int = 15
    transformer: Transformer | None = None  # None: the convolutional inner stack
    trunk_rmsnorm: bool = False  # "-rsnh": a spatial RMSNorm ends the trunk (trunk norm kind 1), else a batch norm

    @property
    def num_blocks(self) -> int:
        return len(self.gpool_blocks)

    @property
    def head_dim(self) -> int:
        """Query/key/value channels per attention head: the mid channels split evenly (KataGo's layouts)."""
        if self.transformer is None:
            return 0
        return self.mid // self.transformer.heads


def _every_third(count: int) -> tuple[bool, ...]:
    return tuple(i % 3 == 0 for i in range(1, count + 1))


def _transformer(name: str, blocks: int, trunk: int, mid: int, gpool: int, heads: int, ffn: int, pairs: int,
                 heads_width: int, *, version: int = 17, rsnh: bool = False) -> Architecture:  # fmt: skip
    """KataGo's transformer layouts: p1 = g1 = heads_width, v1 = v2 = 2 x heads_width, SiLU."""
    return Architecture(
        name, trunk, mid, gpool, (False,) * blocks, p1=heads_width, g1=heads_width, v1=2 * heads_width,
        v2=2 * heads_width, activation="ACTIVATION_SILU", version=version,
        transformer=Transformer(heads, ffn, pairs), trunk_rmsnorm=rsnh,
    )  # fmt: skip


ARCHITECTURES: dict[str, Architecture] = {
    arch.name: arch
    for arch in (
        # the previous pin's architecture (kata1-zhizi-b40c768nbt), KataGo's "historic katago/zhizi architecture"
        Architecture("b40c768nbt", 768, 384, 128, _every_third(40), p1=128, g1=128, v1=256, v2=256),
        # the strongest official kata1 convnet
        Architecture("b28c512nbt", 512, 256, 64, _every_third(28), p1=64, g1=64, v1=128, v2=144),
        # "recommended best config for this cost"
        Architecture("b18c384nbt", 384, 192, 64, (*_every_third(15), False, False, False), p1=48, g1=48, v1=96, v2=128),
        # the pinned network (KataGo v1.17.x's largest transformer, kata1-tf3-b11c768 on the rating list): 11 blocks
        # of 3 attention + SwiGLU pairs at 384 channels, 12 heads of 32, FFN 1152 (docs/runbook.md, the pin)
        _transformer("b11c768h12nbt3tflrs-fson-silu", 11, 768, 384, 96, heads=12, ffn=1152, pairs=3, heads_width=96),
        # v1.17's medium transformer ("stronger per visit than the strongest b28"), RMSNorm before the heads
        _transformer("b10c512h8nbt3tflrs-fson-silu-rsnh", 10, 512, 256, 64, 8, 768, 3, 64, rsnh=True),
        # the KaTrain net's layout (its file is version 15 with the spatial RMSNorm tip): a synthetic twin of the
        # real b10c384h6nbttflrs.bin.gz, layer for layer
        _transformer("b10c384h6nbttflrs", 10, 384, 192, 48, 6, 512, 2, 48, version=15, rsnh=True),
        # a tiny net for tests: loads and answers in milliseconds on the CPU build
        Architecture("b2c32nbt", 32, 16, 8, (False, True), p1=8, g1=8, v1=16, v2=16),
        # a tiny transformer for tests: the transformer layers at a cost of milliseconds
        _transformer("b2c32h2nbttflrs", 2, 32, 16, 8, heads=2, ffn=24, pairs=1, heads_width=8),
    )
}


def architecture(name: str) -> Architecture:
    try:
        return ARCHITECTURES[name]
    except KeyError:
        known = ", ".join(ARCHITECTURES)
        raise ValueError(f"unknown architecture {name!r}; known: {known}") from None


# each layout's parameters as KataGo counts them (`python -m kgbench.nets flops` on a synthetic net of it): with the
# trunk, the blocks and the attention layers, how `kgbench.nets.layouts.known_layout` recognises a real file's layout
PARAMS: dict[str, int] = {
    "b40c768nbt": 232_532_105,
    "b28c512nbt": 72_830_569,
    "b18c384nbt": 26_370_713,
    "b11c768h12nbt3tflrs-fson-silu": 70_442_025,
    "b10c512h8nbt3tflrs-fson-silu-rsnh": 28_537_801,
    "b10c384h6nbttflrs": 10_545_753,
    "b2c32nbt": 29_409,
    "b2c32h2nbttflrs": 16_129,
}
