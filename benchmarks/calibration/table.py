"""The calibration table: one row per cfg, rank agreement, and the Markdown that docs/throughput-model.md shows."""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.calibration.grid import Point
from kgbench.track.machine import machine_line

__all__ = ["SETTING", "Row", "render", "resolved_pairs", "spearman"]

SETTING = "real KataGo and the sim over stdin pipes, no HTTP; cores shared with other work"


@dataclass(frozen=True)
class Row:
    point: Point
    real_wall_rps: float  # median measured req/s (shared machine)
    real_cores: float  # median cores the engine got
    real_cpu_per_query: float  # median CPU seconds per query
    real_capacity: float  # usable cores / CPU seconds per query
    real_low: float  # the lowest and highest capacity over the repetitions
    real_high: float
    sim_rps: float  # the simulated engine process, same load
    real_batch: float  # NN avg batch size from the engines' exit logs (0: not logged)
    sim_batch: float
    model_rps: float  # predict_throughput (the closed-form steady state)

    @property
    def error(self) -> float:
        return self.sim_rps / self.real_capacity - 1.0


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman's rank correlation (average ranks for ties)."""
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError("need two sequences of the same length >= 2")
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    var = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return cov / var if var else 0.0


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def resolved_pairs(rows: Sequence[Row]) -> tuple[int, int]:
    """Pairs of cfgs the measurement tells apart (their ranges over the repetitions do not overlap), and how many
    of them the sim orders as the real engine does. On a flat landscape this says more than a rank correlation
    dominated by ties within the noise."""
    resolved = agree = 0
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            if a.real_low > b.real_high or b.real_low > a.real_high:
                resolved += 1
                agree += (a.real_capacity > b.real_capacity) == (a.sim_rps > b.sim_rps)
    return resolved, agree


def render(rows: Sequence[Row], *, visits: int, reps: int, seed: int, cores: int) -> str:
    out = [
        machine_line(SETTING),
        f"visits {visits}, {reps} interleaved repetitions per cfg (median), seed {seed}, {cores} cores, "
        f"load average now {os.getloadavg()[0]:.1f}",
        "",
        "| cfg (analysis x search, batch, servers) | real wall req/s | real cores | real CPU s/query "
        "| real req/s (capacity) | min-max over reps | sim req/s | error | model req/s | NN batch real / sim |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r.point.label} | {r.real_wall_rps:.2f} | {r.real_cores:.2f} | {r.real_cpu_per_query:.3f} "
            f"| {r.real_capacity:.2f} | {r.real_low:.2f}-{r.real_high:.2f} | {r.sim_rps:.2f} | {r.error:+.0%} "
            f"| {r.model_rps:.2f} | {r.real_batch:.2f} / {r.sim_batch:.2f} |"
        )
    rho = spearman([r.real_capacity for r in rows], [r.sim_rps for r in rows])
    worst = max(rows, key=lambda r: abs(r.error))
    resolved, agree = resolved_pairs(rows)
    out += [
        "",
        f"Spearman rank correlation (real capacity vs sim): {rho:.3f} (target >= 0.8); "
        f"vs the closed-form model: {spearman([r.real_capacity for r in rows], [r.model_rps for r in rows]):.3f}",
        f"worst per-point error: {worst.error:+.1%} at {worst.point.label} (target within 25%)",
        f"pairs the measurement tells apart: {resolved} of {len(rows) * (len(rows) - 1) // 2}; "
        f"the sim orders {agree} of them as the real engine",
    ]
    return "\n".join(out)
