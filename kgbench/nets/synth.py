"""Write a synthetic KataGo network: a named architecture with random weights of sensible scale.

It costs the GPU exactly what a trained net of the same layout costs per evaluation (the same layers and shapes);
its analyses mean nothing. The model name in the file starts with `synthetic-`, and KataGo reports that name, so a
synthetic net cannot pass for a real one. Weights: He-scaled normal convolutions and matmuls, the last layer of
every residual branch (convolution, attention output, feed-forward output) scaled down so that forty blocks of
residual sums stay far inside FP16's range, identity batch norms (mean 0, variance 1, scale 1, bias 0), RMSNorms of
weight 1, learnable RoPE frequencies spread over a few octaves. The layout follows KataGo v1.17.2's writer
(`export_model_pytorch.py`) and reader (`cpp/neuralnet/desc.cpp`) layer for layer.
"""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import numpy as np

from kgbench.nets.architectures import Architecture
from kgbench.nets.stream import ByteSink, TokenWriter
from kgserve.katago.netfile import SYNTHETIC_PREFIX

__all__ = ["synthetic_model_name", "write_synthetic"]

_INPUT_CHANNELS = 22  # V7 spatial features (model versions 8-17)
_GLOBAL_INPUT_CHANNELS = 19
_POST_PROCESS = (20.0, 20.0, 20.0, 20.0, 40.0, 0.25, 150.0)  # what kata1 nets write (td score .. shortterm score)
_RESIDUAL_GAIN = 0.2  # scale of a residual branch's last layer: the trunk's variance grows by ~gain^2 a block
_EPSILON = 1e-20  # KataGo's exporter writes this epsilon for fixup/bias norms
_RMS_EPSILON = 1e-6  # torch.nn.RMSNorm's, as the KaTrain net's file has it
_POLICY_CHANNELS = 2  # version 17: policy and optimistic policy (4 adds the q-value outputs no released net has)


class _NetWriter:
    def __init__(self, out: ByteSink, arch: Architecture, rng: np.random.Generator) -> None:
        self.w = TokenWriter(out)
        self.arch = arch
        self.rng = rng

    def _normal(self, count: int, std: float) -> np.ndarray:
        return self.rng.standard_normal(count, dtype=np.float32) * np.float32(std)

    def conv(self, name: str, size: int, cin: int, cout: int, gain: float = 1.0) -> None:
        self.w.line(name, size, size, cin, cout, 1, 1)
        self.w.floats(self._normal(size * size * cin * cout, gain * math.sqrt(2.0 / (size * size * cin))))

    def norm(self, name: str, channels: int, scale: bool = True) -> None:
        self.w.line(name, channels, _EPSILON, 1 if scale else 0, 1)
        self.w.floats(np.zeros(channels, np.float32))  # mean
        self.w.floats(np.full(channels, 1.0 - _EPSILON, np.float32))  # variance
        if scale:
            self.w.floats(np.ones(channels, np.float32))
        self.w.floats(np.zeros(channels, np.float32))  # bias

    def act(self, name: str) -> None:
        self.w.line(name, self.arch.activation)

    def matmul(self, name: str, cin: int, cout: int, gain: float = 1.0) -> None:
        self.w.line(name, cin, cout)
        self.w.floats(self._normal(cin * cout, gain * math.sqrt(1.0 / cin)))

    def bias(self, name: str, channels: int) -> None:
        self.w.line(name, channels)
        self.w.floats(np.zeros(channels, np.float32))

    def norm_act_conv(self, name: str, size: int, cin: int, cout: int, gain: float = 1.0) -> None:
        self.norm(f"{name}.norm", cin)
        self.act(f"{name}.act")
        self.conv(f"{name}.conv", size, cin, cout, gain)

    def transformer_norm(self, name: str, channels: int) -> None:
        self.w.line(name, channels, _RMS_EPSILON)
        self.w.floats(np.ones(channels, np.float32))

    def rms_norm(self, name: str, channels: int) -> None:
        """The spatial RMSNorm before the heads ("-rsnh"): gamma 1, beta 0, no channel groups."""
        self.w.line(name, channels, _RMS_EPSILON, 1, 0)
        self.w.floats(np.ones(channels, np.float32))
        self.w.floats(np.zeros(channels, np.float32))

    def rope_freqs(self, name: str, kv_heads: int, pairs: int) -> None:
        """(kv heads, pairs, x/y) angular frequencies: a geometric ladder over 1..1/64 radians a point, turned a
        little per head and pair so that the two board axes mix as trained ones do."""
        scale = np.geomspace(1.0, 1.0 / 64, pairs, dtype=np.float32)
        angle = self.rng.uniform(0.0, 2 * np.pi, (kv_heads, pairs)).astype(np.float32)
        freqs = np.stack([scale * np.cos(angle), scale * np.sin(angle)], axis=-1)
        self.w.line(name, kv_heads, pairs, 2)
        self.w.floats(freqs)

    # -- blocks -----------------------------------------------------------------------------------------------
    def inner_block(self, name: str, pool: bool) -> None:
        mid, gpool = self.arch.mid, self.arch.gpool
        self.w.line("gpool_block" if pool else "ordinary_block", name)
        first = f"{name}.normactconv1"
        if pool:
            self.norm(f"{first}.norm", mid)
            self.act(f"{first}.act")
            self.conv(f"{first}.convpool.conv1r", 3, mid, mid - gpool)
            self.conv(f"{first}.convpool.conv1g", 3, mid, gpool)
            self.norm(f"{first}.convpool.normg", gpool)
            self.act(f"{first}.convpool.actg")
            self.matmul(f"{first}.convpool.linear_g", 3 * gpool, mid - gpool, gain=0.5)
            self.norm_act_conv(f"{name}.normactconv2", 3, mid - gpool, mid, gain=_RESIDUAL_GAIN)
        else:
            self.norm_act_conv(first, 3, mid, mid)
            self.norm_act_conv(f"{name}.normactconv2", 3, mid, mid, gain=_RESIDUAL_GAIN)

    def attention_block(self, name: str) -> None:
        a, t = self.arch, self.arch.transformer
        assert t is not None
        dim, heads, kv = a.head_dim, t.heads, t.num_kv_heads
        self.w.line("transformer_attention_block", name, heads, kv, dim, dim, 1, 1 if t.learnable_rope else 0)
        self.transformer_norm(f"{name}.norm1", a.mid)
        self.matmul(f"{name}.q_proj", a.mid, heads * dim)
        self.matmul(f"{name}.k_proj", a.mid, kv * dim)
        self.matmul(f"{name}.v_proj", a.mid, kv * dim)
        self.matmul(f"{name}.out_proj", heads * dim, a.mid, gain=_RESIDUAL_GAIN)
        if t.learnable_rope:
            self.rope_freqs(f"{name}.rope_freqs", kv, dim // 2)
        else:
            self.w.line(f"{name}.rope_theta", 100.0)

    def ffn_block(self, name: str) -> None:
        a, t = self.arch, self.arch.transformer
        assert t is not None
        self.w.line("transformer_ffn_block", name, a.mid, t.ffn, 1)  # SwiGLU
        self.transformer_norm(f"{name}.norm", a.mid)
        self.matmul(f"{name}.ffn_linear1", a.mid, t.ffn)
        self.matmul(f"{name}.ffn_linear_gate", a.mid, t.ffn)
        self.matmul(f"{name}.ffn_linear2", t.ffn, a.mid, gain=_RESIDUAL_GAIN)

    def nested_block(self, index: int, pool: bool) -> None:
        name = f"model.blocks.{index}"
        trunk, mid, t = self.arch.trunk, self.arch.mid, self.arch.transformer
        inner = 2 * t.pairs if t is not None else 2
        self.w.line("nested_bottleneck_block", name, inner)
        self.norm_act_conv(f"{name}.normactconvp", 1, trunk, mid)
        for i in range(inner):
            stack = f"{name}.blockstack.{i}"
            if t is None:
                self.inner_block(stack, pool and i == 0)
            elif i % 2 == 0:
                self.attention_block(stack)
            else:
                self.ffn_block(stack)
        self.norm_act_conv(f"{name}.normactconvq", 1, mid, trunk, gain=_RESIDUAL_GAIN)

    # -- the file -----------------------------------------------------------------------------------------------
    def header(self, model_name: str) -> None:
        self.w.line(model_name, self.arch.version, _INPUT_CHANNELS, _GLOBAL_INPUT_CHANNELS, *_POST_PROCESS)
        self.w.line(0, 0, *([0] * 6))  # no metadata encoder, preferPassAlive off, six unused options

    def trunk(self) -> None:
        a = self.arch
        self.w.line("trunk", a.num_blocks, a.trunk, a.mid, a.mid - a.gpool, a.gpool, a.gpool)
        # trunk tip: 0 a batch norm, 1 an RMSNorm ("-rsnh"); five unused options
        self.w.line(1 if a.trunk_rmsnorm else 0, *([0] * 5))
        self.conv("model.conv_spatial", 3, _INPUT_CHANNELS, a.trunk)
        self.matmul("model.linear_global", _GLOBAL_INPUT_CHANNELS, a.trunk)
        for index, pool in enumerate(a.gpool_blocks):
            self.nested_block(index, pool)
        if a.trunk_rmsnorm:
            self.rms_norm("model.norm_trunkfinal", a.trunk)
        else:
            self.norm("model.norm_trunkfinal", a.trunk)
        self.act("model.act_trunkfinal")

    def policy_head(self) -> None:
        a, name = self.arch, "model.policy_head"
        self.w.line(name)
        if a.version >= 17:
            self.w.line(_POLICY_CHANNELS, 0, 0, 0)  # policy output channels, three unused options
        self.conv(f"{name}.conv1p", 1, a.trunk, a.p1)
        self.conv(f"{name}.conv1g", 1, a.trunk, a.g1)
        self.norm(f"{name}.biasg", a.g1, scale=False)
        self.act(f"{name}.actg")
        self.matmul(f"{name}.linear_g", 3 * a.g1, a.p1, gain=0.5)
        self.norm(f"{name}.bias2", a.p1, scale=False)
        self.act(f"{name}.act2")
        self.conv(f"{name}.conv2p", 1, a.p1, _POLICY_CHANNELS, gain=0.5)
        self.matmul(f"{name}.linear_pass", 3 * a.g1, a.p1, gain=0.5)
        self.bias(f"{name}.linear_pass_bias", a.p1)
        self.act(f"{name}.act_pass")
        self.matmul(f"{name}.linear_pass2", a.p1, _POLICY_CHANNELS, gain=0.5)

    def value_head(self) -> None:
        a, name = self.arch, "model.value_head"
        self.w.line(name)
        if a.version >= 17:
            self.w.line(0, 0, 0)  # three unused options
        self.conv(f"{name}.conv1", 1, a.trunk, a.v1)
        self.norm(f"{name}.bias1", a.v1, scale=False)
        self.act(f"{name}.act1")
        self.matmul(f"{name}.linear2", 3 * a.v1, a.v2, gain=0.5)
        self.bias(f"{name}.bias2", a.v2)
        self.act(f"{name}.act2")
        self.matmul(f"{name}.linear_valuehead", a.v2, 3, gain=0.5)
        self.bias(f"{name}.bias_valuehead", 3)
        self.matmul(f"{name}.linear_miscvaluehead", a.v2, 6, gain=0.1)
        self.bias(f"{name}.bias_miscvaluehead", 6)
        self.conv(f"{name}.conv_ownership", 1, a.v1, 1, gain=0.5)


def synthetic_model_name(arch: Architecture) -> str:
    return f"{SYNTHETIC_PREFIX}{arch.name}"


def write_synthetic(arch: Architecture, out: Path, seed: int = 0) -> int:
    """Writes `arch` with random weights to `out` (`.bin`, or gzipped when it ends in `.gz`); returns the number of
    weights written. KataGo reads the file's name from its first token: `synthetic-<arch>`."""
    if not (out.name.endswith(".bin") or out.name.endswith(".bin.gz")):
        raise ValueError(f"{out}: a synthetic net is written as .bin or .bin.gz (KataGo reads the format by extension)")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    # gzip level 1: random weights do not compress, and level 9 would spend minutes on a 950 MB b40c768nbt
    with gzip.open(partial, "wb", compresslevel=1) if out.name.endswith(".gz") else partial.open("wb") as f:
        writer = _NetWriter(f, arch, np.random.default_rng(seed))
        writer.header(synthetic_model_name(arch))
        writer.trunk()
        writer.policy_head()
        writer.value_head()
    partial.replace(out)  # a half-written net never sits under the final name
    return writer.w.floats_written
