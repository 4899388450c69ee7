"""`python -m kgbench.qualify`: qualify a GPU node in one command (docs/qualify.md).

    python -m kgbench.qualify --binary runtime/bin/cuda/katago --budget 10m   # the pinned net's layout, synthetic

Checks the KataGo build, measures the GPU's matrix-product rate, runs `katago benchmark` over search threads, the
user's line `python -m kgbench -m backend=cuda,trt nnMaxBatchSize=64,128,256` (trt jobs skipped, with the reason,
without a TensorRT build), a wider sweep along the line's bottleneck, promotes the best run into the results
folder's runtime, serves it with `python -m kgserve`, has runtime/serve_analysis.sh answer a sample, and measures
kgserve against the engine's own stdin pipe at that cfg (100-visit and policy loads): every job with its NN evals/s,
MFU, joules per analysis and bottleneck. One results folder: results.json, report.md, plots/, the jobs' MLflow store.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from kgbench.nets.architectures import ARCHITECTURES, PINNED_ARCHITECTURE, PINNED_LAYOUT_KNOWN
from kgbench.qualify.context import Qualification
from kgbench.qualify.options import SCALES, QualifyOptions, parse_budget
from kgbench.qualify.runner import Budget
from kgbench.qualify.workflow import ALWAYS, STEPS, qualify
from kgserve.paths import PROJECT_ROOT
from kgserve.settings import DEFAULT_CONFIG_PATH, ConfigError, load_settings

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m kgbench.qualify", description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", type=Path, help="the KataGo build (default: the runtime config's command for --backend)")
    p.add_argument("--backend", default="cuda", choices=("cuda", "eigen"),
                   help="what the build is: cuda (a GPU node) or eigen (the CPU rehearsal)")  # fmt: skip
    p.add_argument(
        "--net",
        default=f"synthetic:{PINNED_ARCHITECTURE}",
        help=f"katrain (the katrain extra's net), synthetic:ARCH ({', '.join(ARCHITECTURES)}) or a model file "
        f"(default: synthetic:{PINNED_ARCHITECTURE}, "
        + (
            "the pinned network's layout)"
            if PINNED_LAYOUT_KNOWN
            else "the nearest known layout of the pinned network's family: its own is not known here, docs/runbook.md)"
        ),
    )
    p.add_argument("--budget", default="20m", help="time for the whole qualification, e.g. 10m, 1h (default 20m)")
    p.add_argument("--scale", default=None, choices=sorted(SCALES),
                   help="measurement sizes (default: gpu for --backend cuda, rehearsal for eigen)")  # fmt: skip
    p.add_argument("--trt-binary", type=Path, default=None,
                   help="a TensorRT build (default: the runtime config's trt command when it exists)")  # fmt: skip
    p.add_argument("--config", type=Path, default=None, help=f"the base runtime config (default {DEFAULT_CONFIG_PATH})")
    p.add_argument(
        "--steps",
        default=None,
        help="only these measuring steps, comma-separated (benchmark, line, wide, promote, serve, pipe; a step whose "
        "input is missing is skipped): e.g. --steps line for a second net at the user's line (default: all)",
    )
    p.add_argument("--out", type=Path, default=None, help="results folder (default kgbench-reports/qualify-<time>)")
    return p


def options_from_args(args: argparse.Namespace) -> QualifyOptions:
    base = args.config or DEFAULT_CONFIG_PATH
    settings = load_settings(base)
    binary = args.binary
    if binary is None:
        binary = Path(settings.engine.argv_prefix(args.backend)[0])
    trt = args.trt_binary
    if trt is None and "trt" in settings.engine.backends:
        default_trt = Path(settings.engine.argv_prefix("trt")[0])
        trt = default_trt if default_trt.is_file() else None
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    out = (args.out or PROJECT_ROOT / "kgbench-reports" / f"qualify-{stamp}").expanduser().resolve()
    scale = SCALES[args.scale or ("gpu" if args.backend == "cuda" else "rehearsal")]
    steps = None
    if args.steps is not None:
        steps = frozenset(step.strip() for step in args.steps.split(",") if step.strip())
        known = {name for name, *_ in STEPS} - set(ALWAYS)
        if not steps or steps - known:
            raise ValueError(f"--steps {args.steps}: choose among {', '.join(n for n, *_ in STEPS if n in known)}")
    return QualifyOptions(
        binary=binary.expanduser().resolve(),
        backend=args.backend,
        net=args.net,
        out=out,
        budget_s=parse_budget(args.budget),
        scale=scale,
        base_config=Path(base).resolve(),
        trt_binary=trt,
        steps=steps,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        options = options_from_args(args)
    except (ValueError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if options.out.exists() and any(options.out.iterdir()):
        print(f"error: the results folder {options.out} is not empty (--out)", file=sys.stderr)
        return 2
    options.out.mkdir(parents=True, exist_ok=True)
    q = Qualification(options, Budget(options.budget_s))
    status = qualify(q)
    print(f"report: {options.out / 'report.md'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
