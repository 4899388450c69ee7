"""kgbench.nets: model files read (architecture, weights, FLOPs) and synthetic nets written."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kgbench.nets import (
    ARCHITECTURES,
    PINNED_ARCHITECTURE,
    ModelFormatError,
    NetDescription,
    architecture,
    describe_model,
    is_synthetic_model,
    katrain_model_path,
    read_model_name,
    write_synthetic,
)
from kgbench.nets.__main__ import main as nets_main
from kgbench.nets.architectures import PARAMS, PINNED_LAYOUT_KNOWN, PINNED_NETWORK
from kgbench.nets.layouts import known_layout, layout_line
from kgserve.settings import load_settings
from tests.conftest import REPO

TINY = architecture("b2c32nbt")


@pytest.fixture(scope="module")
def tiny_net(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("nets") / "synthetic-b2c32nbt.bin.gz"
    write_synthetic(TINY, path)
    return path


def test_a_synthetic_net_reads_back_as_its_architecture(tiny_net: Path) -> None:
    net = describe_model(tiny_net)
    assert net.name == "synthetic-b2c32nbt" and net.synthetic and net.version == 15
    assert net.architecture == "b2c32nbt"
    assert (net.trunk_channels, net.mid_channels, net.gpool_channels) == (32, 16, 8)
    assert net.block_kinds == ("nested[ordinary,ordinary]", "nested[gpool,ordinary]")
    # KataGo's own count for this file (its log: "synthetic-b2c32nbt (nbt convnet, 29409 params)")
    assert net.params == 29409
    assert is_synthetic_model(tiny_net) and read_model_name(tiny_net) == "synthetic-b2c32nbt"


def test_flops_are_two_multiply_adds_per_weight_at_every_point_plus_the_fixed_parts(tiny_net: Path) -> None:
    net = describe_model(tiny_net)
    fixed = sum(layer.macs_fixed for layer in net.layers)
    assert net.flops(19) == 2 * (net.spatial_weights * 361 + fixed)
    assert net.flops(9) == 2 * (net.spatial_weights * 81 + fixed)
    assert net.attention_flops(19) == 0 and net.rule_of_thumb_flops(19) == 2 * net.spatial_weights * 361


@pytest.mark.parametrize(
    ("name", "spatial_weights", "gflops"),
    [("b40c768nbt", 230_724_608, 166.586), ("b28c512nbt", 72_305_920, 52.206), ("b18c384nbt", 26_139_072, 18.873)],
)
def test_the_named_architectures_cost_what_katagos_table_says(
    tmp_path: Path, name: str, spatial_weights: int, gflops: float
) -> None:
    """The model-format notes' table: b40c768nbt ~170 GFLOP, b28c512nbt ~53, b18c384nbt ~19.2 per 19x19 eval. Only
    b18 is written here (the b40 file is 930 MB); the others are checked through their layer plan."""
    arch = architecture(name)
    if name == "b18c384nbt":
        path = tmp_path / "synthetic-b18c384nbt.bin"
        write_synthetic(arch, path)
        net = describe_model(path)
        assert net.spatial_weights == spatial_weights
        assert net.flops() / 1e9 == pytest.approx(gflops, abs=1e-3)
    mid, trunk, gpool = arch.mid, arch.trunk, arch.gpool
    block = 2 * trunk * mid + 4 * 9 * mid * mid  # 1x1 in and out, four 3x3 convs at mid
    pooled = 9 * mid * (mid - gpool) + 9 * mid * gpool + 9 * (mid - gpool) * mid - 9 * mid * mid * 2
    heads = trunk * (arch.p1 + arch.g1 + arch.v1) + arch.p1 * 2 + arch.v1
    planned = 9 * 22 * trunk + arch.num_blocks * block + sum(arch.gpool_blocks) * pooled + heads
    assert planned == spatial_weights


def test_a_truncated_or_foreign_file_names_what_did_not_parse(tmp_path: Path, tiny_net: Path) -> None:
    data = gzip.decompress(tiny_net.read_bytes())
    cut = tmp_path / "cut.bin"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFormatError, match=r"cut\.bin: .*(ends|ended)"):
        describe_model(cut)
    foreign = tmp_path / "notes.bin"
    foreign.write_text("hello world this is not a net\n")
    with pytest.raises(ModelFormatError, match="model version: expected an integer, found 'world'"):
        describe_model(foreign)
    trailing = tmp_path / "trailing.bin"
    trailing.write_bytes(data + b"extra\n")
    with pytest.raises(ModelFormatError, match="unexpected data after the value head"):
        describe_model(trailing)


def test_the_pinned_architecture_is_the_pinned_networks_or_said_to_stand_in_for_it() -> None:
    """PINNED_ARCHITECTURE (what `synthetic:` qualifications and the sim's default stand for) moves with
    runtime/config.yaml's pinned network (docs/runbook.md, "Re-pinning KataGo and the network"); where the pin's own
    layout is not known here, PINNED_NETWORK names the pin and PINNED_ARCHITECTURE is a known layout of its family."""
    release = load_settings().release
    assert release is not None
    if PINNED_LAYOUT_KNOWN:
        assert release.network.name.startswith(PINNED_ARCHITECTURE)
    else:
        assert release.network.name == f"{PINNED_NETWORK}.bin.gz"
        family = PINNED_ARCHITECTURE.split("h", 1)[0]  # b11c768
        assert family in PINNED_NETWORK
    assert architecture(PINNED_ARCHITECTURE).transformer is not None


def test_a_files_layout_is_named_only_when_it_matches_a_known_one_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`flops` names the layout synth knows a file to be, and says plainly when it knows none (never a near one)."""
    for name in ("b2c32nbt", "b2c32h2nbttflrs", "b10c384h6nbttflrs"):  # the table holds what synth writes
        path = tmp_path / f"{name}.bin"
        write_synthetic(architecture(name), path)
        assert describe_model(path).params == PARAMS[name] and known_layout(describe_model(path)) == name
    net = describe_model(tmp_path / "b2c32nbt.bin")
    monkeypatch.setitem(PARAMS, "b2c32nbt", PARAMS["b2c32nbt"] + 1)  # a file one parameter away: another layout
    assert known_layout(net) is None
    assert "NOT one kgbench.nets synth knows (b2c32nbt, 29,409 params)" in layout_line(net)


def test_synth_refuses_an_extension_katago_would_misread(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\.bin or \.bin\.gz"):
        write_synthetic(TINY, tmp_path / "net.txt.gz")
    with pytest.raises(ValueError, match="unknown architecture 'b99'; known: b40c768nbt"):
        architecture("b99")
    assert set(ARCHITECTURES) >= {"b40c768nbt", "b18c384nbt", "b2c32nbt"}


def test_the_cli_describes_writes_and_fails_clearly(
    tmp_path: Path, tiny_net: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert nets_main(["flops", str(tiny_net), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["synthetic"] is True and info["params"] == 29409 and info["board"] == 19
    out = tmp_path / "again.bin"
    assert nets_main(["synth", "b2c32nbt", str(out), "--seed", "3"]) == 0
    assert "SYNTHETIC" in (capsys.readouterr(), nets_main(["flops", str(out)]), capsys.readouterr().out)[2]
    assert nets_main(["flops", str(tmp_path / "missing.bin.gz")]) == 2
    assert "missing.bin.gz" in capsys.readouterr().err
    assert nets_main(["flops", str(tiny_net), "--board", "40"]) == 2
    # the module runs as documented, without the web stack or mlflow
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "kgbench.nets", "architectures"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert "b40c768nbt: 40 blocks, trunk 768" in done.stdout
    assert not any(heavy in done.stderr for heavy in ("mlflow", "fastapi", "hydra"))


def test_a_tiny_transformer_reads_back_with_its_flops_split(tmp_path: Path) -> None:
    net_path = tmp_path / "synthetic-b2c32h2nbttflrs.bin"
    write_synthetic(architecture("b2c32h2nbttflrs"), net_path)
    net = describe_model(net_path)
    assert net.version == 17 and net.architecture == "b2c32nbt+attn" and net.attention_layers == 2
    assert net.block_kinds == ("nested[attention,ffn]",) * 2
    parts = net.flops_by_part(19)
    assert set(parts) == {"conv", "attention", "ffn", "heads"} and sum(parts.values()) == pytest.approx(net.flops(19))
    # attention: four 16x16 projections at every point and the two points^2 products of 2 heads x 8 channels
    assert parts["attention"] == 2 * 2 * (4 * 16 * 16 * 361 + 2 * 8 * 2 * 361**2)
    assert parts["ffn"] == 2 * 2 * (3 * 16 * 24 * 361)  # SwiGLU: in, gate, out
    assert net.floats > net.params  # the batch norms' running means and variances are floats KataGo does not count


@pytest.fixture(scope="module")
def v117_transformers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, NetDescription]:
    folder = tmp_path_factory.mktemp("v117")
    out = {}
    for name in ("b11c768h12nbt3tflrs-fson-silu", "b10c512h8nbt3tflrs-fson-silu-rsnh"):
        path = folder / f"synthetic-{name}.bin"
        write_synthetic(architecture(name), path)
        out[name] = describe_model(path)
        path.unlink()  # 282 MB and 114 MB
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "params", "floats_m", "mflop", "attention_share"),
    [
        ("b11c768h12nbt3tflrs-fson-silu", 70_442_025, 70.5, 57_286, 0.115),
        ("b10c512h8nbt3tflrs-fson-silu-rsnh", 28_537_801, 28.6, 24_518, 0.163),
    ],
)
def test_the_v117_transformers_cost_what_their_published_files_do(
    v117_transformers: dict[str, NetDescription],
    name: str,
    params: int,
    floats_m: float,
    mflop: int,
    attention_share: float,
) -> None:
    """Published figures of the real release files (sanderland/vibego, experiments/2026-08-01-katago-net-
    compression.md, read off the files: params as the floats in the file, MFLOP/eval at 19x19, the attention share);
    `params` is KataGo's own count for our file (its log line, tests/katago/test_nets.py)."""
    net = v117_transformers[name]
    assert net.params == params and net.version == 17
    assert round(net.floats / 1e6, 1) == floats_m
    assert round(net.flops() / 1e6) == mflop
    parts = net.flops_by_part()
    assert sum(parts.values()) == pytest.approx(net.flops())
    assert parts["ffn"] > parts["attention"] > parts["conv"] > parts["heads"] > 0
    assert round(net.attention_flops() / net.flops(), 3) == attention_share  # the points^2 products' share


@pytest.mark.skipif(importlib.util.find_spec("katrain") is None, reason="the katrain extra is not installed")
def test_the_katrain_layout_written_synthetic_is_the_real_file_layer_for_layer(tmp_path: Path) -> None:
    """The writer's transformer layers against a real transformer file: every layer's name, shape and cost equal."""
    real = describe_model(katrain_model_path())
    path = tmp_path / "synthetic-b10c384h6nbttflrs.bin"
    write_synthetic(architecture("b10c384h6nbttflrs"), path)
    twin = describe_model(path)
    assert twin.name == "synthetic-" + real.name and twin.synthetic
    assert (twin.version, twin.trunk_channels, twin.mid_channels, twin.block_kinds) == (
        real.version, real.trunk_channels, real.mid_channels, real.block_kinds
    )  # fmt: skip
    assert twin.layers == real.layers and twin.floats == real.floats == 10_557_657


@pytest.mark.skipif(importlib.util.find_spec("katrain") is None, reason="the katrain extra is not installed")
def test_the_katrain_net_is_found_and_counted() -> None:
    """KaTrain 1.20's b10c384h6nbttflrs: KataGo's log says "(nbt transformer, 10545753 params)"; its attention is
    counted (4 x 361^2 x 192 per layer, 20 layers), so its FLOPs run 1.26x the 2 x weights x 361 rule of thumb."""
    net = describe_model(katrain_model_path())
    assert net.name == "b10c384h6nbttflrs" and not net.synthetic
    assert net.params == 10_545_753 and net.attention_layers == 20
    assert net.attention_flops() == 20 * 4 * 361**2 * 192
    assert net.flops() / 1e9 == pytest.approx(9.5625, abs=1e-4)
    assert net.flops() / net.rule_of_thumb_flops() == pytest.approx(1.265, abs=1e-3)
    parts = net.flops_by_part()
    assert parts["attention"] == pytest.approx(4.131e9, rel=1e-3) and parts["ffn"] == pytest.approx(4.259e9, rel=1e-3)


def test_the_katago_test_net_when_the_real_tier_names_it() -> None:
    """g170-b6c96 (KataGo's log: "(convnet, 1027911 params)"): a plain resnet, FLOPs = 2 x weights x 361."""
    model = os.environ.get("KGBENCH_KATAGO_MODEL", "")
    if "g170-b6c96" not in model:
        pytest.skip("KGBENCH_KATAGO_MODEL does not name the g170-b6c96 test net")
    net = describe_model(Path(model))
    assert net.params == 1_027_911 and net.architecture == "b6c96" and net.version == 8
    assert net.flops() / 1e9 == pytest.approx(0.7236, abs=1e-4)
    assert net.flops() / net.rule_of_thumb_flops() == pytest.approx(1.0, abs=1e-4)
