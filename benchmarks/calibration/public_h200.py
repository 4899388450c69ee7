"""The sim against the one public record of KataGo on an H200: the mission's node's `katago benchmark` grid.

``python -m benchmarks.calibration.public_h200 [--profile NAME] [--derive] [--json OUT] [--measured GRID.tsv]``

The record (docs/data/issue42/hopper-34-20260119/, from the public repository hawkoli1987/KataGo): KataGo v1.16.4,
``kata1-b28c512nbt-s12223529728-d5663671073``, ``katago benchmark -threads T -fixed-batch-size T -visits V
-numpositions N`` on the release's default_gtp.cfg (one NN server thread) for T = 64..384, CUDA (cuDNN 8.9.7) and
TensorRT 8.6.1, visits/s of each. Each CUDA point is put to the sim's own benchmark model (the figures
``python -m kgserve.sim benchmark`` prints: ``benchmark_figures``) under the profile that stands for that net on the
H200 (``h200-b28c512nbt``); the check passes when every point is within ``TOLERANCE`` and the order holds (Spearman
>= ``MIN_RHO``). ``--derive`` prints how that profile is scaled from ``h200-b40c768`` (the H100 fit's H200
derivation) to the b28c512nbt layout; ``--measured`` puts this project's own run of the same grid
(``benchmarks/gpu_h200.sh --grid`` writes it, KataGo v1.17.2 on a synthetic b28c512nbt) beside the record and the
sim. The sim has no TensorRT: the TensorRT column is printed as the ratio to CUDA.
Table and reading: docs/throughput-model.md, "The H200 against its public record".
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.calibration.table import spearman
from kgserve.sim.model.profiles import DeviceProfile, get_profile
from kgserve.sim.model.throughput import SimParams, benchmark_figures

__all__ = ["MIN_RHO", "RECORD", "TOLERANCE", "Checked", "GridPoint", "check", "main", "passes", "read_grid"]

RECORD = Path(__file__).resolve().parents[2] / "docs" / "data" / "issue42" / "hopper-34-20260119" / "summary.tsv"
TOLERANCE = 0.25
MIN_RHO = 0.8
PROFILE = "h200-b28c512nbt"
SERVER_THREADS = 1  # default_gtp.cfg leaves numNNServerThreadsPerModel at KataGo's default


@dataclass(frozen=True)
class GridPoint:
    backend: str
    threads: int
    batch: int
    visits: int
    positions: int
    visits_per_s: float


@dataclass(frozen=True)
class Checked:
    point: GridPoint
    sim_visits_per_s: float
    sim_evals_per_s: float
    sim_batch: float
    trt_visits_per_s: float | None

    @property
    def error(self) -> float:
        return self.sim_visits_per_s / self.point.visits_per_s - 1.0


def read_grid(path: Path = RECORD) -> list[GridPoint]:
    with path.open(newline="") as fh:
        return [
            GridPoint(
                row["backend"],
                int(row["threads"]),
                int(row["batch_size"]),
                int(row["visits"]),
                int(row["num_positions"]),
                float(row["visits_per_sec"] or 0),
            )
            for row in csv.DictReader(fh, delimiter="\t")
        ]


def check(grid: Sequence[GridPoint], profile: DeviceProfile) -> list[Checked]:
    """Each CUDA point of the grid beside what the sim's benchmark gives for it under `profile`."""
    trt = {(p.threads, p.batch): p.visits_per_s for p in grid if p.backend == "trt"}
    out = []
    for p in (p for p in grid if p.backend == "cuda"):
        params = SimParams(1, p.threads, p.batch, SERVER_THREADS, 20, max_visits=p.visits, profile=profile)
        fig = benchmark_figures(params, p.visits)
        out.append(Checked(p, fig.visits_per_s, fig.evals_per_s, fig.batch, trt.get((p.threads, p.batch))))
    return out


def render(rows: Sequence[Checked], profile: DeviceProfile) -> str:
    lines = [
        f"profile {profile.name} ({profile.device_name}) against {RECORD.parent.name} (KataGo v1.16.4, CUDA):",
        "threads=batch  visits  measured v/s  sim v/s  error   sim NN evals/s  sim batch  TensorRT/CUDA",
    ]
    for r in rows:
        ratio = f"{r.trt_visits_per_s / r.point.visits_per_s:.2f}x" if r.trt_visits_per_s else "-"
        lines.append(
            f"{r.point.threads:>13}  {r.point.visits:>6}  {r.point.visits_per_s:>12,.0f}  {r.sim_visits_per_s:>7,.0f}"
            f"  {r.error:>+6.1%}  {r.sim_evals_per_s:>14,.0f}  {r.sim_batch:>9.1f}  {ratio:>13}"
        )
    worst = max(rows, key=lambda r: abs(r.error))
    rho = spearman([r.point.visits_per_s for r in rows], [r.sim_visits_per_s for r in rows])
    best = max(rows, key=lambda r: r.point.visits_per_s)
    mfu = best.point.visits_per_s * profile.net_gflop * 1e9 / (profile.peak_tflops * 1e12)
    lines += [
        f"worst error {worst.error:+.1%} at {worst.point.threads} threads (tolerance {TOLERANCE:.0%}); "
        f"Spearman {rho:.2f} (at least {MIN_RHO})",
        f"the record's best CUDA point: {best.point.visits_per_s:,.0f} visits/s x {profile.net_gflop:.1f} GFLOP = "
        f"{mfu:.2f} of the card's {profile.peak_tflops:.0f} TFLOP/s FP16 (per visit; KataGo's benchmark "
        "evaluates about a row a visit, a little more at many threads)",
    ]
    return "\n".join(lines)


def passes(rows: Sequence[Checked]) -> bool:
    rho = spearman([r.point.visits_per_s for r in rows], [r.sim_visits_per_s for r in rows])
    return all(abs(r.error) <= TOLERANCE for r in rows) and rho >= MIN_RHO


def derive_profile() -> str:
    """How h200-b28c512nbt comes from h200-b40c768: the transformer derivation's scaling rule, convnet to convnet."""
    from benchmarks.calibration.gpu import describe_architecture  # writes two synthetic nets: only on --derive
    from benchmarks.calibration.gpu_derive import H200, derive_transformer, net_cost

    source, target = net_cost(describe_architecture("b40c768nbt")), net_cost(describe_architecture("b28c512nbt"))
    derived = derive_transformer(
        get_profile("h200-b40c768"),
        source,
        target,
        get_profile("h100-b40c768nbt"),
        H200,
        H200,
        name=PROFILE,
        host_cores=32,
    ).profile
    return (
        f"{PROFILE} from h200-b40c768: d1 x {target.gflop / source.gflop:.4f} (FLOPs) = {derived.d1:.6f}, "
        f"d0 x {target.kernels}/{source.kernels} (kernels) = {derived.d0:.5f}, weights {derived.weights_gb:.3f} GiB, "
        f"row {derived.row_gb:.5f} GiB; 1/d1 = {1 / derived.d1:,.0f} NN evals/s at large batches"
    )


def render_measured(ours: Sequence[GridPoint], theirs: Sequence[GridPoint], profile: DeviceProfile) -> str:
    """This project's run of the grid beside the record's CUDA points and the sim, point by point."""
    record = {p.threads: p.visits_per_s for p in theirs if p.backend == "cuda"}
    lines = ["threads=batch  visits  ours v/s (v1.17.2)  theirs v/s (v1.16.4 CUDA)  ours/theirs  sim v/s"]
    for p in ours:
        params = SimParams(1, p.threads, p.batch, SERVER_THREADS, 20, max_visits=p.visits, profile=profile)
        sim = benchmark_figures(params, p.visits).visits_per_s
        other = record.get(p.threads)
        ratio = f"{p.visits_per_s / other:.2f}" if other and p.visits_per_s else "-"
        lines.append(
            f"{p.threads:>13}  {p.visits:>6}  {p.visits_per_s:>18,.0f}  {other or 0:>25,.0f}  {ratio:>11}  {sim:>7,.0f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.calibration.public_h200", description=__doc__)
    parser.add_argument("--profile", default=PROFILE, help=f"the sim profile to check (default {PROFILE})")
    parser.add_argument("--derive", action="store_true", help="also print how the profile is derived")
    parser.add_argument("--json", type=Path, help="write the checked points here")
    parser.add_argument("--measured", type=Path, help="this project's run of the grid (gpu_h200.sh --grid's grid.tsv)")
    args = parser.parse_args(argv)
    profile = get_profile(args.profile)
    rows = check(read_grid(), profile)
    print(render(rows, profile))
    if args.derive:
        print(derive_profile())
    if args.measured:
        ours = [p for p in read_grid(args.measured) if p.visits_per_s > 0]
        print(render_measured(ours, read_grid(), profile))
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {
                        "threads": r.point.threads,
                        "visits": r.point.visits,
                        "measured_visits_per_s": r.point.visits_per_s,
                        "sim_visits_per_s": round(r.sim_visits_per_s, 1),
                        "error": round(r.error, 4),
                        "trt_visits_per_s": r.trt_visits_per_s,
                    }
                    for r in rows
                ],
                indent=1,
            )
            + "\n"
        )
    ok = passes(rows)
    print("PASS" if ok else "FAIL: refit the H200 derivation on these points (docs/throughput-model.md)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
