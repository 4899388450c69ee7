"""Parse a KataGo model file into a NetDescription, following KataGo v1.17.2's `cpp/neuralnet/desc.cpp` step by step.

Float blocks are skipped, not loaded: a file is described (shapes, weights, FLOPs) in the time it takes to walk
its headers. The checks are desc.cpp's own shape checks, so a file this parser accepts has the layout KataGo expects;
KataGo itself remains the judge of the weights.
"""

from __future__ import annotations

from pathlib import Path

from kgbench.nets.description import Layer, NetDescription
from kgbench.nets.stream import ModelFormatError, TokenReader, binary_floats_for, open_model_bytes

__all__ = ["LATEST_MODEL_VERSION", "describe_model", "parse_model"]

LATEST_MODEL_VERSION = 17  # NNModelVersion::latestModelVersionImplemented in v1.17.2
_META_INPUT_CHANNELS = {0: 0, 1: 192}  # NNModelVersion::getNumInputMetaChannels


class _LayerReader:
    """The layers, one by one: reads each kind of layer desc.cpp knows (its header checked, its floats skipped) and
    records it, with its weights and cost, in the part of the net being read. _Parser puts them together."""

    def __init__(self, reader: TokenReader, version: int = 0) -> None:
        self.r = reader
        self.version = version
        self.layers: list[Layer] = []
        self.part = "conv"  # where the layers being read count (description.PARTS)

    def add(self, name: str, kind: str, params: int, **cost: int) -> None:
        self.layers.append(Layer(name, kind, params, part=self.part, **cost))

    def conv(self) -> tuple[int, int]:
        name = self.r.token("conv layer name")
        ky, kx, cin, cout, dy, dx = (self.r.integer(f"{name}: conv shape") for _ in range(6))
        if min(ky, kx, cin, cout, dy, dx) <= 0 or ky % 2 != 1 or kx % 2 != 1:
            raise ModelFormatError(f"{name}: bad conv shape {ky}x{kx} {cin}->{cout} dilation {dy},{dx}")
        self.r.floats(ky * kx * cin * cout, name)
        macs = ky * kx * cin * cout
        self.add(name, "conv", macs, macs_per_point=macs)
        return cin, cout

    def batch_norm(self) -> int:
        name = self.r.token("norm layer name")
        channels = self.r.integer(f"{name}: channels")
        epsilon = self.r.number(f"{name}: epsilon")
        has_scale = self.r.integer(f"{name}: hasScale")
        has_bias = self.r.integer(f"{name}: hasBias")
        if channels < 1 or not epsilon > 0:
            raise ModelFormatError(f"{name}: bad batch norm header ({channels} channels, epsilon {epsilon})")
        learned = (1 if has_scale else 0) + (1 if has_bias else 0)
        for _ in range(2 + learned):  # running mean and variance, then the learned scale and bias
            self.r.floats(channels, name)
        # KataGo counts only the learned scale and bias as parameters (its log's "N params"): so do we
        self.add(name, "norm", learned * channels)
        return channels

    def norm_act(self) -> None:
        self.batch_norm()
        self.activation()

    def activation(self) -> None:
        name = self.r.token("activation name")
        if self.version >= 11:
            kind = self.r.token(f"{name}: activation kind")
            if kind not in ("ACTIVATION_IDENTITY", "ACTIVATION_RELU", "ACTIVATION_MISH", "ACTIVATION_SILU"):
                raise ModelFormatError(f"{name}: unknown activation {kind}")

    def matmul(self, per_point: bool = False) -> tuple[int, int]:
        name = self.r.token("matmul layer name")
        cin, cout = self.r.integer(f"{name}: in channels"), self.r.integer(f"{name}: out channels")
        if cin <= 0 or cout <= 0:
            raise ModelFormatError(f"{name}: bad matmul shape {cin}->{cout}")
        self.r.floats(cin * cout, name)
        macs = cin * cout
        if per_point:
            self.add(name, "matmul", macs, macs_per_point=macs)
        else:
            self.add(name, "matmul", macs, macs_fixed=macs)
        return cin, cout

    def mat_bias(self) -> int:
        name = self.r.token("matbias layer name")
        channels = self.r.integer(f"{name}: channels")
        self.r.floats(channels, name)
        self.add(name, "bias", channels)
        return channels

    def transformer_norm(self) -> int:
        name = self.r.token("transformer norm name")
        channels = self.r.integer(f"{name}: channels")
        self.r.number(f"{name}: epsilon")
        self.r.floats(channels, name)
        self.add(name, "norm", channels)
        return channels

    def rms_norm(self) -> int:
        name = self.r.token("rmsnorm name")
        channels = self.r.integer(f"{name}: channels")
        self.r.number(f"{name}: epsilon")
        self.r.integer(f"{name}: spatial")
        if self.r.integer(f"{name}: cgroupSize") != 0:
            raise ModelFormatError(f"{name}: grouped spatial RMSNorm is not supported")
        self.r.floats(channels, name)
        self.r.floats(channels, name)
        self.add(name, "norm", 2 * channels)
        return channels

    def unused_options(self, count: int, what: str) -> None:
        for _ in range(count):
            if self.r.integer(what) != 0:
                raise ModelFormatError(f"{what}: unknown/unsupported option")


class _Parser(_LayerReader):
    """The net's grammar over its layers, as desc.cpp walks it: the trunk's block stack (blocks nest), then the
    policy and value heads."""

    # -- blocks -----------------------------------------------------------------------------------------------
    def block_stack(self, count: int, channels: int, owner: str) -> list[str]:
        kinds: list[str] = []
        for _ in range(count):
            kind = self.r.token(f"{owner}: block kind")
            parse = {
                "ordinary_block": self.ordinary_block,
                "gpool_block": self.gpool_block,
                "nested_bottleneck_block": self.nested_block,
                "transformer_attention_block": self.attention_block,
                "transformer_ffn_block": self.ffn_block,
            }.get(kind)
            if parse is None:
                raise ModelFormatError(f"{owner}: found unknown block kind: {kind}")
            kinds.append(parse(channels))
        return kinds

    def ordinary_block(self, channels: int) -> str:
        name = self.r.token("block name")
        self.norm_act()
        self.conv()
        self.norm_act()
        _, out = self.conv()
        self._check_channels(name, out, channels)
        return "ordinary"

    def gpool_block(self, channels: int) -> str:
        name = self.r.token("gpool block name")
        self.norm_act()
        self.conv()  # regular
        self.conv()  # gpool
        self.norm_act()
        self.matmul()  # gpool -> bias
        self.norm_act()
        _, out = self.conv()
        self._check_channels(name, out, channels)
        return "gpool"

    def nested_block(self, channels: int) -> str:
        name = self.r.token("nested bottleneck block name")
        count = self.r.integer(f"{name}: num blocks")
        if count < 1:
            raise ModelFormatError(f"{name}: nested bottleneck res block num blocks must be positive")
        self.norm_act()
        _, mid = self.conv()
        inner = self.block_stack(count, mid, name)
        self.norm_act()
        _, out = self.conv()
        self._check_channels(name, out, channels)
        return f"nested[{','.join(inner)}]"

    def attention_block(self, channels: int) -> str:
        name = self.r.token("attention block name")
        heads, kv_heads, q_dim, v_dim, use_rope, learnable = (self.r.integer(f"{name}: header") for _ in range(6))
        if min(heads, kv_heads, q_dim, v_dim) < 1 or heads % kv_heads:
            raise ModelFormatError(f"{name}: bad attention header")
        outer, self.part = self.part, "attention"
        self.transformer_norm()
        q_in, _ = self.matmul(per_point=True)
        for _ in range(3):  # k, v, out
            self.matmul(per_point=True)
        self._check_channels(name, q_in, channels)
        if use_rope and learnable:
            rope = self.r.token(f"{name}: rope freqs name")
            n_kv, pairs, two = (self.r.integer(f"{rope}: shape") for _ in range(3))
            self.r.floats(n_kv * pairs * two, rope)
            self.add(rope, "rope", n_kv * pairs * two)
        elif use_rope:
            self.r.token(f"{name}: rope theta name")
            self.r.number(f"{name}: rope theta")
        self.add(f"{name}.attention", "attention", 0, attention_dims=heads * (q_dim + v_dim), heads=heads)
        self.part = outer
        return "attention"

    def ffn_block(self, channels: int) -> str:
        name = self.r.token("ffn block name")
        width = self.r.integer(f"{name}: channels")
        self.r.integer(f"{name}: ffn channels")
        swiglu = self.r.integer(f"{name}: useSwiGLU")
        self._check_channels(name, width, channels)
        outer, self.part = self.part, "ffn"
        self.transformer_norm()
        for _ in range(3 if swiglu else 2):
            self.matmul(per_point=True)
        self.part = outer
        return "ffn"

    @staticmethod
    def _check_channels(name: str, found: int, expected: int) -> None:
        if found != expected:
            raise ModelFormatError(f"{name}: {found} channels where the enclosing stack has {expected}")

    # -- trunk and heads --------------------------------------------------------------------------------------
    def trunk(self, meta_encoder: int) -> tuple[int, int, int, list[str]]:
        self.r.token("trunk name")
        num_blocks, trunk, mid, _regular, _dilated, gpool = (self.r.integer("trunk header") for _ in range(6))
        norm_kind = 0
        if self.version >= 15:
            norm_kind = self.r.integer("trunk norm kind")
            self.unused_options(5, "trunk options")
        if num_blocks < 1 or min(trunk, mid, gpool) <= 0:
            raise ModelFormatError("trunk: bad header (blocks and channels must be positive)")
        self.conv()
        self.matmul()
        if meta_encoder > 0:
            self.metadata_encoder()
        kinds = self.block_stack(num_blocks, trunk, "trunk")
        if norm_kind:
            self.rms_norm()
        else:
            self.batch_norm()
        self.activation()
        return trunk, mid, gpool, kinds

    def metadata_encoder(self) -> None:
        name = self.r.token("sgf metadata encoder name")
        self.r.integer(f"{name}: input channels")
        self.matmul()
        self.mat_bias()
        self.activation()
        self.matmul()
        self.mat_bias()
        self.activation()
        self.matmul()

    def policy_head(self) -> None:
        name = self.r.token("policy head name")
        if self.version >= 17:
            if self.r.integer(f"{name}: policy out channels") not in (2, 4):
                raise ModelFormatError(f"{name}: policy head got invalid policyOutChannels")
            self.unused_options(3, f"{name}: options")
        self.conv()  # p1
        self.conv()  # g1
        self.norm_act()
        self.matmul()  # gpool -> bias
        self.norm_act()
        self.conv()  # p2
        self.matmul()  # gpool -> pass
        if self.version >= 15:
            self.mat_bias()
            self.activation()
            self.matmul()

    def value_head(self) -> None:
        name = self.r.token("value head name")
        if self.version >= 17:
            self.unused_options(3, f"{name}: options")
        self.conv()
        self.norm_act()
        self.matmul()
        self.mat_bias()
        self.activation()
        self.matmul()
        self.mat_bias()
        self.matmul()
        self.mat_bias()
        self.conv()  # ownership


def _header(p: _Parser) -> tuple[str, int, int, int]:
    name = p.r.token("model name")
    version = p.r.integer("model version")
    if not 3 <= version <= LATEST_MODEL_VERSION:
        raise ModelFormatError(f"{name}: model version {version} (this reader knows 3..{LATEST_MODEL_VERSION})")
    p.version = version
    inputs, global_inputs = p.r.integer("numInputChannels"), p.r.integer("numInputGlobalChannels")
    if version >= 13:
        for _ in range(7):
            p.r.number("post-process multipliers")
    meta_encoder = 0
    if version >= 15:
        meta_encoder = p.r.integer("metaEncoderVersion")
        if meta_encoder not in _META_INPUT_CHANNELS:
            raise ModelFormatError(f"{name}: metaEncoderVersion {meta_encoder} not implemented")
        p.r.integer("preferPassAliveUnderSuicideRules")
        p.unused_options(6, "model options")
    return name, inputs, global_inputs, meta_encoder


def parse_model(reader: TokenReader) -> NetDescription:
    p = _Parser(reader)
    name, inputs, global_inputs, meta_encoder = _header(p)
    trunk, mid, gpool, kinds = p.trunk(meta_encoder)
    p.part = "heads"
    p.policy_head()
    p.value_head()
    if not reader.at_end():
        raise ModelFormatError(f"{name}: unexpected data after the value head (byte {reader.position})")
    return NetDescription(
        name, p.version, inputs, global_inputs, trunk, mid, gpool, tuple(kinds), tuple(p.layers), reader.floats_read
    )


def describe_model(path: Path) -> NetDescription:
    """A model file's architecture, weights and FLOPs; ModelFormatError names the layer that did not parse."""
    try:
        data = open_model_bytes(path)
    except OSError as exc:
        raise ModelFormatError(f"{path}: {exc.strerror or exc}") from exc
    try:
        return parse_model(TokenReader(data, binary_floats_for(path)))
    except ModelFormatError as exc:
        raise ModelFormatError(f"{path.name}: {exc}") from None
    finally:
        if not isinstance(data, bytes):
            data.close()
