"""What a KataGo network is, as far as its cost goes: its layers, weights and FLOPs per evaluation."""

from __future__ import annotations

from dataclasses import dataclass, field

from kgserve.katago.netfile import SYNTHETIC_PREFIX

__all__ = ["PARTS", "Layer", "NetDescription"]

# where a layer's FLOPs go in `python -m kgbench.nets flops`: the trunk's convolutions (with its input layer and
# global pooling), the attention blocks (q/k/v/out projections and the points^2 score and mixing products), the
# transformer feed-forward blocks, and the policy and value heads
PARTS = ("conv", "attention", "ffn", "heads")


@dataclass(frozen=True)
class Layer:
    """One weighted layer. Its cost on a board of `points` points is
    `2 * (macs_per_point * points + macs_fixed + attention_dims * points**2)` FLOPs (a multiply-add is 2 FLOPs)."""

    name: str
    kind: str  # conv | matmul | bias | norm | attention
    params: int
    macs_per_point: int = 0  # convolutions and per-position projections (transformer q/k/v/out, FFN)
    macs_fixed: int = 0  # once per evaluation: global-pooling and value-head matmuls
    attention_dims: int = 0  # heads x (qHeadDim + vHeadDim): QK^T and attention x V, each points^2 x dims MACs
    heads: int = 0  # attention heads (a points x points score matrix each)
    part: str = "conv"  # one of PARTS

    def flops(self, points: int) -> float:
        return 2.0 * (self.macs_per_point * points + self.macs_fixed + self.attention_dims * points * points)


@dataclass(frozen=True)
class NetDescription:
    """A network's header and layers, as KataGo v1.17.2's desc.cpp reads them."""

    name: str
    version: int
    input_channels: int
    input_global_channels: int
    trunk_channels: int
    mid_channels: int
    gpool_channels: int
    block_kinds: tuple[str, ...]  # the trunk's top-level blocks: ordinary, gpool, nested_bottleneck[...], ...
    layers: tuple[Layer, ...] = field(repr=False)
    floats: int = 0  # floats in the file: params plus the batch norms' running means and variances

    @property
    def synthetic(self) -> bool:
        return self.name.startswith(SYNTHETIC_PREFIX)

    @property
    def params(self) -> int:
        """As KataGo counts them (its log's "N params"): batch norms' learned scale and bias only."""
        return sum(layer.params for layer in self.layers)

    @property
    def spatial_weights(self) -> int:
        """Weights applied at every board point (convolutions, per-position projections): the `W` of `2 x W x 361`."""
        return sum(layer.params for layer in self.layers if layer.macs_per_point)

    @property
    def attention_layers(self) -> int:
        return sum(1 for layer in self.layers if layer.attention_dims)

    @property
    def architecture(self) -> str:
        """A short label in KataGo's naming style: `b40c768nbt`, `b10c384nbt+attn`, `b6c96`."""
        nested = any(kind.startswith("nested") for kind in self.block_kinds)
        label = f"b{len(self.block_kinds)}c{self.trunk_channels}{'nbt' if nested else ''}"
        return f"{label}+attn" if self.attention_layers else label

    def flops(self, board: int = 19) -> float:
        """FLOPs of one evaluation on a `board` x `board` board (KataGo evaluates the whole padded board)."""
        return sum(layer.flops(board * board) for layer in self.layers)

    def flops_by_part(self, board: int = 19) -> dict[str, float]:
        """flops() split into PARTS (they sum to it)."""
        out = dict.fromkeys(PARTS, 0.0)
        for layer in self.layers:
            out[layer.part] += layer.flops(board * board)
        return out

    def attention_flops(self, board: int = 19) -> float:
        points = board * board
        return 2.0 * sum(layer.attention_dims * points * points for layer in self.layers)

    def rule_of_thumb_flops(self, board: int = 19) -> float:
        """`2 x spatial weights x points`: the estimate the FLOPs table in KataGo's model notes starts from."""
        return 2.0 * self.spatial_weights * board * board
