"""Plot artifacts of a load run: throughput vs concurrency, and the latency CDF of every level."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, never a window

import matplotlib.pyplot as plt

from kgbench.load.types import LevelSummary, RequestRecord

__all__ = ["plot_latency_cdf", "plot_throughput", "write_plots"]


def plot_throughput(levels: Sequence[LevelSummary], path: Path, title: str) -> Path:
    """req/s (left axis, with its 95% interval) and p99 (right axis) per concurrency level, both in the legend; a job
    that measured one level is one point each, labelled with its figures."""
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [lv.concurrency for lv in levels]
    ys = [lv.req_per_s for lv in levels]
    low = [max(0.0, lv.req_per_s - lv.req_per_s_low) for lv in levels]
    high = [max(0.0, lv.req_per_s_high - lv.req_per_s) for lv in levels]
    ax.errorbar(xs, ys, yerr=[low, high], marker="o", capsize=3, label="req/s (95% interval)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.minorticks_off()
    ax.set_xlabel("concurrency (requests in flight)")
    ax.set_ylabel("req/s")
    ax.grid(True, alpha=0.3)
    right = ax.twinx()
    p99 = [lv.p99_ms for lv in levels]
    right.plot(xs, p99, marker="s", color="tab:red", linestyle="--", label="p99 ms")
    right.set_ylabel("p99 latency (ms)")
    if len(levels) == 1:
        ax.annotate(f"{ys[0]:.1f} req/s, p99 {p99[0]:.0f} ms", (xs[0], ys[0]), xytext=(8, 8),
                    textcoords="offset points", fontsize=8)  # fmt: skip
    handles, labels = ax.get_legend_handles_labels()
    more, more_labels = right.get_legend_handles_labels()
    ax.legend(handles + more, labels + more_labels, fontsize=8, loc="best")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_latency_cdf(records: Sequence[RequestRecord], path: Path, title: str) -> Path:
    fig, ax = plt.subplots(figsize=(6, 4))
    for level in sorted({r.level for r in records}):
        lat = sorted(r.latency_ms for r in records if r.level == level and r.phase == "measure" and r.error is None)
        if lat:
            ax.plot(lat, [(i + 1) / len(lat) for i in range(len(lat))], label=f"concurrency {level}")
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("share of requests")
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_plots(
    levels: Sequence[LevelSummary], records: Sequence[RequestRecord], folder: Path, title: str
) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    if not levels:
        return []
    return [
        plot_throughput(levels, folder / "throughput_vs_concurrency.png", title),
        plot_latency_cdf(records, folder / "latency_cdf.png", title),
    ]
