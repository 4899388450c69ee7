"""Fit the simulated engine's GPU profile to what a real GPU measured, and say how well it fits.

``python -m benchmarks.calibration.gpu --data RESULTS.jsonl... [--net b40] [--sweep ID] [--save FIT.json]``

Reads measured points (``benchmarks.calibration.gpu_data``: a device run's JSON lines and/or a kgbench sweep
in MLflow), fits the base profile's GPU constants to them (``benchmarks.calibration.gpu_fit``), and prints the
table of measured against modelled figures, the fit's quality (Spearman rank correlation, worst per-point error)
and the fitted constants as a ``DeviceProfile`` to paste into ``kgserve/sim/model/profiles.py``. ``--check`` scores the
base profile as it is (no fit): what the tests hold the committed profile to. ``--derive`` then prints the profile
of another card derived from the fitted one (``benchmarks.calibration.gpu_derive``); ``--holdout FILE...`` scores
the result on points it was not fitted to. Method and results:
docs/throughput-model.md.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path

from benchmarks.calibration.gpu_data import Measurements, read_data, read_sweep
from benchmarks.calibration.gpu_derive import (
    H100,
    H200,
    Derivation,
    TransformerDerivation,
    derive,
    derive_transformer,
    net_cost,
)
from benchmarks.calibration.gpu_fit import Quality, Scored, fit, quality, round_profile, score
from kgbench.nets import NetDescription, architecture, describe_model, write_synthetic
from kgserve.sim.model.profiles import DeviceProfile, get_profile

__all__ = [
    "derive_from_run",
    "derive_transformer_from",
    "describe_architecture",
    "load_measurements",
    "main",
    "profile_source",
    "render",
    "render_derivation",
]

DEFAULT_BASE = "h100-b40c768nbt"
CARDS = {"h100": H100, "h200": H200}


def load_measurements(
    data: Sequence[Path], net: str | None, sweep: str | None = None, tracking_uri: str | None = None
) -> Measurements:
    out = Measurements()
    for path in data:
        out.extend(read_data(path, net))
    if sweep is not None:
        out.extend(read_sweep(tracking_uri, None if sweep == "latest" else sweep))
    return out


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.0%}"


def render(rows: Sequence[Scored], q: Quality, dev: DeviceProfile) -> str:
    out = [
        "| point | measured | model | error | visits/s measured / model | NN batch measured / model |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        unit = "evals/s" if r.kind == "bench" else "req/s"
        batch = f"{r.measured_batch:.1f} / {r.model_batch:.1f}" if r.measured_batch else f"- / {r.model_batch:.1f}"
        out.append(
            f"| {r.label} | {r.measured:,.1f} {unit} | {r.model:,.1f} | {r.error:+.1%} "
            f"| {r.measured_visits:,.0f} / {r.model_visits:,.0f} | {batch} |"
        )
    rho = [f"all {len(rows)} points (visits/s) {q.spearman_visits:.3f}"]
    if q.spearman_bench is not None:
        rho.append(f"benchmark points (NN evals/s) {q.spearman_bench:.3f}")
    if q.spearman_load is not None:
        rho.append(f"load points (req/s) {q.spearman_load:.3f}")
    out += [
        "",
        f"Spearman rank correlation, measured vs model: {'; '.join(rho)} (aim >= 0.8)",
        f"worst per-point error: {q.worst.error:+.1%} at {q.worst.label} (aim within 25%)",
    ]
    if q.worst_batch is not None:
        out.append(f"worst NN batch error: {_pct(q.worst_batch.batch_error)} at {q.worst_batch.label}")
    ceiling = dev.roofline_evals_per_s if dev.peak_tflops and dev.net_gflop else 0.0
    if ceiling:
        rate = 1.0 / dev.d1 if dev.d1 > 0 and dev.batch_exponent == 1.0 else float("inf")
        out.append(
            f"device rate at large batches 1/d1 = {rate:,.0f} NN evals/s; roofline {dev.peak_tflops:g} TFLOP/s / "
            f"{dev.net_gflop:g} GFLOP = {ceiling:,.0f}/s ({rate / ceiling:.2f} of it)"
        )
    return "\n".join(out)


def profile_source(dev: DeviceProfile) -> str:
    """The profile as Python source for kgserve/sim/model/profiles.py (fields that differ from the defaults)."""
    default = DeviceProfile(name="", kind=dev.kind, device_name="", host_cores=dev.host_cores)
    lines = [f"{dev.name.upper().replace('-', '_')} = DeviceProfile("]
    for f in fields(dev):
        value = getattr(dev, f.name)
        if f.name in ("name", "kind", "device_name", "host_cores") or value != getattr(default, f.name):
            lines.append(f"    {f.name}={value!r},")
    return "\n".join([*lines, ")"])


def derive_from_run(
    measured: DeviceProfile, run_dir: Path, arch: str, target: str, host_cores: int, name: str | None = None
) -> Derivation:
    """The target card's profile from the measured one, with the run's own figures: the conv-shaped GEMM rate
    (gemm.jsonl, the entry that is not the square 8192^3 product) and the net's parameter count (nets.jsonl)."""
    gemm = [json.loads(line) for line in (run_dir / "gemm.jsonl").read_text().splitlines() if line.strip()]
    conv = [g for g in gemm if g.get("tflops") and len(set(g["shape"].split("x"))) > 1]
    nets = [json.loads(line) for line in (run_dir / "nets.jsonl").read_text().splitlines() if line.strip()]
    net = [n for n in nets if n.get("architecture") == arch]
    if not conv or not net:
        raise ValueError(f"{run_dir}: no conv-shaped GEMM rate in gemm.jsonl or no {arch} in nets.jsonl")
    return derive(
        measured,
        architecture(arch),
        int(net[0]["params"]),
        float(conv[0]["tflops"]),
        H100,
        CARDS[target],
        name=name or f"{target}-{arch}",
        host_cores=host_cores,
    )


def describe_architecture(name: str) -> NetDescription:
    """A named architecture's description, read off a synthetic net of it written to a temporary file."""
    with tempfile.TemporaryDirectory(prefix="kgbench-arch-") as folder:
        path = Path(folder) / f"synthetic-{name}.bin"
        write_synthetic(architecture(name), path)
        return describe_model(path)


def derive_transformer_from(
    measured: DeviceProfile, source_arch: str, target_arch: str, target: str, host_cores: int, name: str | None = None
) -> TransformerDerivation:
    """`target_arch` on the `target` card from a transformer's fit on the H100 (``gpu_derive.derive_transformer``),
    the b40c768nbt fit's achieved rate per GFLOP as the high estimate."""
    return derive_transformer(
        measured,
        net_cost(describe_architecture(source_arch)),
        net_cost(describe_architecture(target_arch)),
        get_profile(DEFAULT_BASE),
        H100,
        CARDS[target],
        name=name or f"{target}-{target_arch}",
        host_cores=host_cores,
    )


def render_transformer_derivation(d: TransformerDerivation, target: str) -> str:
    dev = d.profile
    return "\n".join(
        [
            f"{target} {dev.name} derived: 1/d1 = {d.evals_per_s:,.0f} NN evals/s at large batches (the fit's achieved "
            f"rate per GFLOP; {d.evals_per_s_high:,.0f} at the convnet fit's; up to x{d.bandwidth_high:.2f} if "
            "bandwidth-bound)",
            profile_source(round_profile(dev)),
        ]
    )


def render_derivation(d: Derivation, target: str) -> str:
    return "\n".join(
        [
            f"{target} derived: trunk per row {d.trunk_source_s * 1e3:.4f} ms measured card -> "
            f"{d.trunk_target_s * 1e3:.4f} ms; rest of d1 (heads, input, gaps) {d.rest_s * 1e3:.4f} ms",
            f"rate at large batches x{d.speedup:.3f} (range x{d.speedup_low:.2f}-x{d.speedup_high:.3f}): "
            f"1/d1 = {1 / d.profile.d1:,.0f} NN evals/s",
            profile_source(round_profile(d.profile)),
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.calibration.gpu", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--data", type=Path, nargs="*", default=[], help="a device run's results.jsonl, a qualification's results.json"
    )
    parser.add_argument("--net", help="keep only the records of this net (the JSON lines' `net` field, e.g. b40)")
    parser.add_argument("--sweep", help="a kgbench sweep in MLflow: its id, `latest` or `all` (every sweep)")
    parser.add_argument("--tracking-uri", help="MLflow tracking URI of --sweep (default: kgbench's)")
    parser.add_argument("--base", default=DEFAULT_BASE, help="profile to start from (and to --check)")
    parser.add_argument("--check", action="store_true", help="score the base profile as it is: no fit")
    parser.add_argument(
        "--holdout", type=Path, nargs="*", default=[], help="measurement files to score the result on, not fit to"
    )
    parser.add_argument(
        "--fixed", nargs="*", default=[], metavar="NAME=VALUE", help="hold fitted constants at a value (d2=0)"
    )
    parser.add_argument("--restarts", type=int, default=4)
    parser.add_argument("--save", type=Path, help="write the fitted profile, its quality and the points (JSON)")
    parser.add_argument("--derive", choices=sorted(CARDS), help="also derive this card's profile from the fit")
    parser.add_argument("--arch", default="b40c768nbt", help="--derive: the net's architecture (kgbench.nets)")
    parser.add_argument(
        "--derive-arch", help="--derive: another transformer than --arch (a transformer's fit scaled to it)"
    )
    parser.add_argument("--derive-host-cores", type=int, default=32, help="--derive: the target node's cores")
    parser.add_argument("--derive-name", help="--derive: the derived profile's name (default CARD-ARCH)")
    args = parser.parse_args(argv)
    data = load_measurements(args.data, args.net, args.sweep, args.tracking_uri)
    if not len(data):
        parser.error("no measured points: give --data files (and --net) or --sweep")
    base = get_profile(args.base)
    try:
        fixed = {k: float(v) for k, v in (item.split("=", 1) for item in args.fixed)}
    except ValueError:
        parser.error(f"--fixed takes NAME=VALUE pairs, not {args.fixed}")
    dev = base if args.check else round_profile(fit(base, data, fixed=fixed, restarts=args.restarts))
    rows = score(dev, data)
    q = quality(rows)
    for line in data.skipped:
        print(f"skipped: {line}")
    print(render(rows, q, dev))
    if args.holdout:
        held = load_measurements(args.holdout, args.net)
        held_rows = score(dev, held)
        print("\nheld out (scored, not fitted):\n" + render(held_rows, quality(held_rows), dev))
    if not args.check:
        print("\nfitted profile (kgserve/sim/model/profiles.py):\n" + profile_source(dev))
    if args.derive and args.derive_arch:
        scaled = derive_transformer_from(
            dev, args.arch, args.derive_arch, args.derive, args.derive_host_cores, args.derive_name
        )
        print("\n" + render_transformer_derivation(scaled, args.derive))
    elif args.derive:
        if not args.data:
            parser.error("--derive reads gemm.jsonl and nets.jsonl next to the first --data file")
        derived = derive_from_run(
            dev, args.data[0].parent, args.arch, args.derive, args.derive_host_cores, args.derive_name
        )
        print("\n" + render_derivation(derived, args.derive))
    if args.save:
        args.save.write_text(
            json.dumps(
                {
                    "base": base.name,
                    "data": [str(p) for p in args.data] + ([f"sweep {args.sweep}"] if args.sweep else []),
                    "profile": asdict(dev),
                    "spearman_visits": q.spearman_visits,
                    "spearman_bench": q.spearman_bench,
                    "spearman_load": q.spearman_load,
                    "worst_error": q.worst.error,
                    "worst_point": q.worst.label,
                    "points": [{**asdict(r), "error": r.error} for r in rows],
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
