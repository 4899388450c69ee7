"""The report's pictures (matplotlib, Agg backend: no display needed).

- `pareto_plot`: req/s against p99 per backend, with each backend's Pareto front (no other run of the
  backend is both faster and has a lower p99);
- `concurrency_plot`: throughput against concurrency per run (the per-level series logged with
  step = concurrency), or, for mode=engine sweeps, visits/s against search threads.
Error bars are the 95% intervals of req/s (kgbench.load.interval); the knee (the concurrency where a run
reaches 95% of its best req/s) is marked with a diamond.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import NullFormatter, ScalarFormatter

__all__ = ["concurrency_plot", "pareto_front", "pareto_plot"]

_STYLES = ("-", "--", "-.", ":")
_BACKEND_COLOURS = {"trt": "tab:green", "cuda": "tab:blue", "eigen": "tab:gray", "sim": "tab:orange"}


def _colour(backend: str, index: int) -> str:
    return _BACKEND_COLOURS.get(backend, f"C{index % 10}")


def pareto_front(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """(p99, req/s) points not dominated by another (lower-or-equal p99 and higher-or-equal req/s,
    one of them strictly), sorted by p99."""
    front: list[tuple[float, float]] = []
    best = float("-inf")
    for p99, rps in sorted(points, key=lambda p: (p[0], -p[1])):
        if rps > best:
            front.append((p99, rps))
            best = rps
    return front


def _empty(ax: plt.Axes, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, fontsize=12)


def pareto_plot(table: pd.DataFrame, path: Path, title: str) -> Path:
    """Scatter of req/s against p99 (ms), one colour per backend, the winner circled."""
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=110)
    # a sweep whose every job failed early (or that ran none) has none of these columns at all
    needed = ["req_per_s", "p99_ms", "backend"]
    data = table.dropna(subset=needed[:2]) if set(needed) <= set(table.columns) else pd.DataFrame(columns=needed)
    if data.empty:
        _empty(ax, "no run has both req/s and p99")
    for index, (backend, group) in enumerate(data.groupby("backend", sort=True)):
        colour = _colour(str(backend), index)
        clean = group[(group["errors"].fillna(1) == 0)]
        dirty = group.drop(clean.index)
        ax.scatter(clean["p99_ms"], clean["req_per_s"], color=colour, s=45, label=f"{backend}", zorder=3)
        if {"req_per_s_ci_low", "req_per_s_ci_high"} <= set(group.columns):
            low = (group["req_per_s"] - group["req_per_s_ci_low"]).clip(lower=0).fillna(0)
            high = (group["req_per_s_ci_high"] - group["req_per_s"]).clip(lower=0).fillna(0)
            ax.errorbar(group["p99_ms"], group["req_per_s"], yerr=[low, high], fmt="none", ecolor=colour,
                        alpha=0.6, capsize=3, zorder=2)  # fmt: skip
        if not dirty.empty:
            ax.scatter(
                dirty["p99_ms"],
                dirty["req_per_s"],
                color=colour,
                marker="x",
                s=45,
                zorder=3,
                label=f"{backend} (errors)",
            )
        front = pareto_front(list(zip(clean["p99_ms"], clean["req_per_s"], strict=True)))
        if len(front) > 1:
            xs, ys = zip(*front, strict=True)
            ax.step(xs, ys, where="post", color=colour, alpha=0.6, linewidth=1.5, zorder=2)
        for _, row in group.iterrows():
            if row.get("label"):
                ax.annotate(
                    str(row["label"]),
                    (row["p99_ms"], row["req_per_s"]),
                    fontsize=7,
                    xytext=(4, 3),
                    textcoords="offset points",
                    alpha=0.8,
                )
    winners = data[data.get("winner", pd.Series(False, index=data.index)).astype(bool)]
    if not winners.empty:
        ax.scatter(
            winners["p99_ms"],
            winners["req_per_s"],
            s=220,
            facecolors="none",
            edgecolors="red",
            linewidths=2,
            label="winner (promote rule)",
            zorder=4,
        )
    ax.set_xlabel("p99 latency (ms)  - lower is better")
    ax.set_ylabel("throughput (req/s)  - higher is better")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if not data.empty:
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def concurrency_plot(
    series: Mapping[str, Mapping[int, float]],
    backends: Mapping[str, str],
    labels: Mapping[str, str],
    path: Path,
    title: str,
    xlabel: str = "concurrency (queries in flight)",
    ylabel: str = "throughput (req/s)",
    bounds: Mapping[str, Mapping[int, tuple[float, float]]] | None = None,
    knees: Mapping[str, int] | None = None,
) -> Path:
    """One line per run: value against step (concurrency, or threads for mode=engine); ``bounds`` (run ->
    step -> (low, high)) draws error bars, ``knees`` (run -> step) marks each run's knee."""
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=110)
    order = sorted(set(backends.values()))
    drawn = 0
    per_backend: dict[str, int] = {}
    all_steps: set[int] = set()
    for run_id, points in series.items():
        if not points:
            continue
        steps = sorted(points)
        backend = backends.get(run_id, "?")
        colour = _colour(backend, order.index(backend) if backend in order else 0)
        label = f"{backend} {labels.get(run_id, '')}".strip() or run_id[:8]
        style = _STYLES[per_backend.get(backend, 0) % len(_STYLES)]
        per_backend[backend] = per_backend.get(backend, 0) + 1
        all_steps.update(steps)
        ax.plot(steps, [points[s] for s in steps], marker="o", linestyle=style, color=colour, alpha=0.85, label=label)
        run_bounds = (bounds or {}).get(run_id, {})
        with_bounds = [s for s in steps if s in run_bounds]
        if with_bounds:
            yerr = [
                [max(0.0, points[s] - run_bounds[s][0]) for s in with_bounds],
                [max(0.0, run_bounds[s][1] - points[s]) for s in with_bounds],
            ]
            ax.errorbar(with_bounds, [points[s] for s in with_bounds], yerr=yerr, fmt="none", ecolor=colour,
                        alpha=0.6, capsize=3)  # fmt: skip
        knee = (knees or {}).get(run_id)
        if knee is not None and knee in points:
            ax.scatter([knee], [points[knee]], marker="D", s=70, color=colour, edgecolors="black", zorder=4,
                       label="knee (95% of max)" if drawn == 0 else None)  # fmt: skip
        drawn += 1
    if drawn == 0:
        _empty(ax, "no per-level series logged")
    else:
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(all_steps))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.legend(loc="best", fontsize=7)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
