"""`python -m kgbench.nets`: describe a KataGo network, write a synthetic one, find the KaTrain net.

flops MODEL [--board N] [--json]   architecture, weights and FLOPs per evaluation (N x N board, default 19), split
                                   into the trunk's convolutions, attention, feed-forward and the heads
synth ARCH OUT [--seed S]          write ARCH with random weights to OUT (.bin, or .bin.gz)
architectures                      the architectures `synth` knows
katrain                            the path of the net inside the installed katrain package
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from kgbench.nets.architectures import ARCHITECTURES, architecture
from kgbench.nets.description import PARTS, NetDescription
from kgbench.nets.layouts import known_layout, layout_line
from kgbench.nets.parse import describe_model
from kgbench.nets.stream import ModelFormatError
from kgbench.nets.synth import write_synthetic
from kgserve.katago.netfile import KatrainNetMissing, katrain_model_path

__all__ = ["describe", "main"]


def describe(net: NetDescription, board: int) -> dict[str, object]:
    """What `flops --json` prints: the figures kgbench records for a run's network."""
    flops = net.flops(board)
    return {
        "name": net.name,
        "architecture": net.architecture,
        "known_layout": known_layout(net),
        "version": net.version,
        "synthetic": net.synthetic,
        "blocks": len(net.block_kinds),
        "trunk_channels": net.trunk_channels,
        "mid_channels": net.mid_channels,
        "params": net.params,
        "floats": net.floats,
        "spatial_weights": net.spatial_weights,
        "attention_layers": net.attention_layers,
        "board": board,
        "flops_per_eval": flops,
        "attention_flops_per_eval": net.attention_flops(board),
        "flops_by_part": net.flops_by_part(board),
        "rule_of_thumb_flops": net.rule_of_thumb_flops(board),
        "flops_over_rule_of_thumb": flops / net.rule_of_thumb_flops(board),
    }


_PART_NAMES = {"conv": "convolutions", "attention": "attention", "ffn": "feed-forward", "heads": "heads"}


def _print_description(net: NetDescription, board: int) -> None:
    flops, parts = net.flops(board), net.flops_by_part(board)
    split = ", ".join(f"{_PART_NAMES[p]} {parts[p] / 1e9:.3f} ({parts[p] / flops:.1%})" for p in PARTS if parts[p])
    print(
        f"{net.name}: {net.architecture} (model version {net.version}"
        f"{', SYNTHETIC: random weights' if net.synthetic else ''})\n"
        f"  {net.params:,} params as KataGo counts them ({net.floats:,} floats in the file; "
        f"{net.spatial_weights:,} weights applied at every board point), {net.attention_layers} attention layers\n"
        f"  {flops / 1e9:.3f} GFLOP per {board}x{board} evaluation: {split}\n"
        f"  2 x weights x points = {net.rule_of_thumb_flops(board) / 1e9:.3f} GFLOP "
        f"(ratio {flops / net.rule_of_thumb_flops(board):.3f}; attention's points^2 products "
        f"{net.attention_flops(board) / 1e9:.3f})\n"
        f"{layout_line(net)}"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kgbench.nets", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    flops = commands.add_parser("flops", help="architecture, weights and FLOPs per evaluation of a model file")
    flops.add_argument("model", type=Path)
    flops.add_argument("--board", type=int, default=19, help="board size (default 19)")
    flops.add_argument("--json", action="store_true", help="print one JSON object")
    synth = commands.add_parser("synth", help="write a synthetic net (random weights) of a named architecture")
    synth.add_argument("architecture", help=f"one of: {', '.join(ARCHITECTURES)}")
    synth.add_argument("out", type=Path, help="output file, .bin (fast) or .bin.gz")
    synth.add_argument("--seed", type=int, default=0)
    commands.add_parser("architectures", help="the architectures synth knows")
    commands.add_parser("katrain", help="print the path of the KaTrain net (the katrain extra)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "flops":
            if args.board < 2 or args.board > 37:
                raise ValueError(f"--board {args.board}: KataGo boards are 2..37")
            net = describe_model(args.model)
            print(json.dumps(describe(net, args.board))) if args.json else _print_description(net, args.board)
        elif args.command == "synth":
            weights = write_synthetic(architecture(args.architecture), args.out, seed=args.seed)
            print(f"wrote {args.out}: synthetic {args.architecture}, {weights:,} weights (random: for throughput only)")
        elif args.command == "architectures":
            for arch in ARCHITECTURES.values():
                t = arch.transformer
                inner = (
                    f"{t.pairs} attention+FFN pairs, {t.heads} heads of {arch.head_dim}, FFN {t.ffn}"
                    if t is not None
                    else f"gpool {arch.gpool}"
                )
                print(f"{arch.name}: {arch.num_blocks} blocks, trunk {arch.trunk}, mid {arch.mid}, {inner}")
        else:
            print(katrain_model_path())
    except (ModelFormatError, ValueError, KatrainNetMissing, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
