"""What a device run's qualifications measured at the user's line, beside what the sim's profiles and the H100 said.

``python -m benchmarks.device_compare RESULTS.json... [--out compare.md]``

For each qualification (``python -m kgbench.qualify``'s results.json; benchmarks/gpu_h200.sh writes them): the GPU
and its measured dense FP16 GEMM rate, the net, and every job of the user's line with its analyses/s and 95%
interval, NN evals/s, MFU, J/analysis and bottleneck; beside each, the sim's prediction for the same cfg with the
profile that stands for the net on that card (`kgserve.sim.model.profiles.profile_for_model`: on an H200
h200-b11c768 for the pinned transformer, h200-b40c768 for the b40 convnet; on an H100 the fitted h100 profiles; the
default profile for any other net) and the H100's
req/s for the same cfg where the H100 qualification of 2026-11-25 ran that net (docs/data/gpu-h100-2026-11-25/).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kgserve.paths import PROJECT_ROOT
from kgserve.sim.model.profiles import DEFAULT_PROFILE, profile_for_model
from kgserve.sim.model.throughput import predict_throughput

__all__ = ["H100_RUNS", "compare", "main"]

# the H100 qualifications of 2026-11-25 by the net's architecture (req/s of their jobs is right as recorded; their
# NN evals/s and J/analysis were recomputed in docs/gpu-h100.md)
H100_DATA = PROJECT_ROOT / "docs" / "data" / "gpu-h100-2026-11-25"
H100_RUNS = {"b40c768nbt": H100_DATA / "qualify-b40c768nbt" / "results.json"}


def _step(results: Mapping[str, Any], name: str) -> dict[str, Any]:
    return next((s.get("data") or {} for s in results.get("steps", []) if s.get("name") == name), {})


def _fmt(value: Any, spec: str) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return format(value, spec)


def _h100_rates(architecture: str) -> dict[str, float]:
    path = H100_RUNS.get(architecture)
    if path is None or not path.is_file():
        return {}
    jobs = _step(json.loads(path.read_text()), "line").get("jobs", [])
    return {job["job"]: job["req_per_s"] for job in jobs if job.get("req_per_s")}


def compare(results: Mapping[str, Any]) -> list[str]:
    """One qualification's line against the sim and the H100, as Markdown lines."""
    net, gemm, line = _step(results, "net"), _step(results, "gemm"), _step(results, "line")
    load = results["options"]["scale"]["load"]
    visits, concurrency = int(load["max_visits"]), int(load["concurrency"][0])
    device = str(gemm.get("device") or _step(results, "node").get("gpu") or "")
    card = "h100" if "H100" in device else "h200"  # the mission's card unless the run was on an H100
    profile = profile_for_model(str(net.get("name", "")), card) or DEFAULT_PROFILE
    if results["options"].get("backend") == "eigen":  # the CPU rehearsal: the CPU build's profile
        profile = "cpu-eigen-b6c96"
    h100 = _h100_rates(str(net.get("architecture", "")))
    out = [
        f"## {net.get('name', '?')} ({net.get('architecture', '?')}, {_fmt(net.get('gflops_per_eval'), '.2f')} "
        f"GFLOP/eval) on {device or 'no GPU'}",
        "",
        f"KataGo {results.get('katago_version', '?')}; measured GEMM rate {_fmt(gemm.get('tflops'), '.0f')} TFLOP/s "
        f"(datasheet {_fmt(gemm.get('datasheet_tflops'), '.0f')}); {visits} visits, {concurrency} in flight; the sim's "
        f"profile {profile}.",
        "",
        "| job | status | analyses/s [95% CI] | NN evals/s | MFU | J/analysis | bottleneck | sim req/s "
        "| measured / sim | H100 req/s |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for job in line.get("jobs", []):
        measured = job.get("req_per_s")
        cfg = {k: v for k, v in (job.get("cfg") or {}).items() if k != "homeDataDir"}
        sim = predict_throughput(cfg, visits, concurrency, profile=profile) if cfg else math.nan
        low, high = job.get("req_per_s_ci_low"), job.get("req_per_s_ci_high")
        interval = f" [{low:.1f}, {high:.1f}]" if low is not None and high is not None else ""
        ratio = measured / sim if measured and sim and sim > 0 else math.nan
        out.append(
            f"| {job.get('job')} | {job.get('status')} | {_fmt(measured, '.1f')}{interval} | "
            f"{_fmt(job.get('nn_evals_per_s'), ',.0f')} | {_fmt(job.get('mfu'), '.2f')} | "
            f"{_fmt(job.get('gpu_j_per_analysis'), '.2f')} | {job.get('bottleneck') or '-'} | {_fmt(sim, '.1f')} | "
            f"{_fmt(ratio, '.2f')} | {_fmt(h100.get(str(job.get('job'))), '.1f')} |"
        )
    return [*out, ""]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.device_compare", description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path, nargs="+", help="qualifications' results.json")
    parser.add_argument("--out", type=Path, help="write the Markdown here too")
    args = parser.parse_args(argv)
    lines = ["# The user's line, measured, against the sim's profiles and the H100", ""]
    for path in args.results:
        lines += compare(json.loads(path.read_text()))
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
