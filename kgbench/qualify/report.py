"""The qualification's results folder: results.json (everything), report.md (what a person reads) and plots/."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kgbench.qualify.context import Qualification
from kgbench.qualify.runner import StepRecord

__all__ = ["headline", "write_report"]


def _step(q: Qualification, name: str) -> StepRecord | None:
    return next((r for r in q.records if r.name == name), None)


def headline(q: Qualification) -> dict[str, Any]:
    """The answer: the promoted cfg's analyses/s at the qualification's visits, its MFU, J/analysis, bottleneck."""
    if q.best is None:
        return {}
    m = q.best["metrics"]
    return {
        "net": q.net.name if q.net else "",
        "synthetic_net": bool(q.net and q.net.synthetic),
        "visits": q.options.scale.load.get("max_visits"),
        "cfg": q.best["cfg"],
        "analyses_per_s": m.get("req_per_s"),
        "ci95": [m.get("req_per_s_ci_low"), m.get("req_per_s_ci_high")],
        "p99_ms": m.get("p99_ms"),
        "nn_evals_per_s": m.get("nn_evals_per_s"),
        "mfu": m.get("mfu"),
        "mfu_datasheet": m.get("mfu_datasheet"),
        "gpu_j_per_analysis": m.get("gpu_j_per_analysis"),
        "analyses_per_kj": m.get("analyses_per_kj"),
        "bottleneck": q.best["bottleneck"],
        "bottleneck_figures": q.best["bottleneck_figures"],
        "knob": q.best["knob"],
        "decision": q.best["decision"],
        "baseline": q.best.get("baseline"),
    }


def _fmt(value: Any, spec: str = ".3g") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return format(value, spec) if isinstance(value, int | float) else str(value)


def _interval(r: dict[str, Any]) -> str:
    low, high = r.get("req_per_s_ci_low"), r.get("req_per_s_ci_high")
    return f" [{low:.1f}, {high:.1f}]" if low is not None and high is not None else ""


def _jobs_table(rows: list[dict[str, Any]]) -> list[str]:
    out = ["| job | status | req/s [95% CI] | p99 ms | NN evals/s | MFU | J/analysis | GPU % | bottleneck | reason |",
           "|---|---|---:|---:|---:|---:|---:|---:|---|---|"]  # fmt: skip
    for r in rows:
        out.append(
            f"| {r['job']} | {r['status']} | {_fmt(r.get('req_per_s'), '.1f')}{_interval(r)} | "
            f"{_fmt(r.get('p99_ms'), '.0f')} | "
            f"{_fmt(r.get('nn_evals_per_s'), ',.0f')} | {_fmt(r.get('mfu'), '.2f')} | "
            f"{_fmt(r.get('gpu_j_per_analysis'), '.2f')} | {_fmt(r.get('gpu_busy_pct'), '.0f')} | "
            f"{r.get('bottleneck') or '-'} | {(r.get('reason') or '')[:120]} |"
        )
    return out


def _pipe_table(data: dict[str, Any]) -> list[str]:
    results = data.get("results", {})
    out = ["| load | path | req/s | NN evals/s | MFU | J/analysis | GPU % | host % | kgserve cores | bottleneck |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]  # fmt: skip
    for key, row in results.items():
        path, load = key.split("_", 1)
        load_name = f"{data.get('visits', '?')} visits" if load == "analysis" else "policy, maxVisits 1"
        out.append(
            f"| {load_name} | {'kgserve (HTTP)' if path == 'kgserve' else 'engine stdin pipe'} | "
            f"{_fmt(row.get('req_per_s'), '.1f')} | {_fmt(row.get('nn_evals_per_s'), ',.0f')} | "
            f"{_fmt(row.get('mfu'), '.2f')} | {_fmt(row.get('gpu_j_per_analysis'), '.3f')} | "
            f"{_fmt(row.get('windows_gpu_util_mean'), '.0f')} | {_fmt(row.get('host_cpu_busy_pct'), '.0f')} | "
            f"{_fmt(row.get('frontend_cpu_cores'), '.2f')} | {row.get('bottleneck', '-')} |"
        )
    ratios = data.get("ratios", {})
    out.append("")
    named = {"analysis": f"{data.get('visits', '?')}-visit load", "policy": "policy load (maxVisits 1)"}
    out.append("kgserve / engine pipe: " + ", ".join(f"{named.get(k, k)} {v:.2f}" for k, v in ratios.items()))
    return out


def _markdown(q: Qualification, head: dict[str, Any]) -> str:
    o = q.options
    lines = [f"# Node qualification: {q.facts.get('gpu', '?')}, {head.get('net') or o.net}", ""]
    lines.append(
        f"KataGo {q.katago_version or '?'} ({o.backend} build {o.binary}), net `{o.net}`, scale {o.scale.name}, "
        f"budget {o.budget_s:.0f} s, host {q.facts.get('host', '?')} ({q.facts.get('cpu_cores', '?')} cores), "
        f"driver {q.facts.get('gpu_driver') or '-'}, commit {q.facts.get('git_commit', '?')}."
    )
    if head.get("synthetic_net"):
        lines.append(
            "\n**Synthetic net** (random weights of the real architecture): throughput is real, analyses are noise."
        )
    lines += ["", "## Headline", ""]
    if head:
        ci = f"95% CI {_fmt(head['ci95'][0], '.1f')}..{_fmt(head['ci95'][1], '.1f')}"
        rate = f"**{_fmt(head['analyses_per_s'], '.1f')} analyses/s** at {head['visits']} visits"
        mfu = f"**MFU {_fmt(head['mfu'], '.2f')}** of the measured GEMM rate"
        sheet = f"{_fmt(head['mfu_datasheet'], '.2f')} of the datasheet"
        energy = f"**{_fmt(head['gpu_j_per_analysis'], '.2f')} J/analysis**"
        per_kj = f"{_fmt(head['analyses_per_kj'], '.0f')} analyses/kJ"
        lines.append(
            f"{rate} ({ci}, p99 {_fmt(head['p99_ms'], '.0f')} ms), {_fmt(head['nn_evals_per_s'], ',.0f')} NN evals/s, "
            f"{mfu} ({sheet}), {energy} ({per_kj}), bottleneck **{head['bottleneck'] or '-'}** "
            f"({head['bottleneck_figures']})."
        )
        lines.append(f"\ncfg: `{json.dumps(head['cfg'])}`; {head['decision']}")
        if head.get("knob"):
            lines.append(f"\nWhat would move it: {head['knob']}.")
        if head.get("baseline"):
            lines.append(f"\nAgainst the node's users' own grid: {head['baseline']}.")
    elif q.options.steps is not None and "promote" not in q.options.steps:
        lines.append(f"Not promoted (--steps {','.join(sorted(q.options.steps))}): every job's figures are below.")
    else:
        lines.append("No cfg was promoted: see the steps below.")
    lines += ["", "## Steps", "", "| # | step | status | s | summary |", "|---:|---|---|---:|---|"]
    for i, r in enumerate(q.records, 1):
        lines.append(f"| {i} | {r.name} | {r.status} | {r.seconds:.0f} | {r.summary.replace('|', '/')} |")
    for name, title in (("line", "The user's line"), ("wide", "The wider sweep")):
        step = _step(q, name)
        if step is not None and step.data.get("jobs"):
            lines += ["", f"## {title}", "", *_jobs_table(step.data["jobs"])]
    pipe = _step(q, "pipe")
    if pipe is not None and pipe.data.get("results"):
        lines += ["", "## kgserve against the engine's own pipe (promoted cfg)", "", *_pipe_table(pipe.data)]
    store = f"`mlflow ui --backend-store-uri {q.tracking_uri}`"
    lines += ["", f"Plots: `plots/`; every figure: `results.json`; every job: {store}."]
    return "\n".join(lines) + "\n"


def _plots(q: Qualification, folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def save(fig: Any, name: str) -> None:
        written.append(folder / name)
        fig.savefig(written[-1], dpi=110, bbox_inches="tight")
        plt.close(fig)

    bench = _step(q, "benchmark")
    if bench is not None and bench.data.get("series"):
        series = sorted((int(k), v) for k, v in bench.data["series"].items())
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot([t for t, _ in series], [v.get("nn_evals_per_s", 0) for _, v in series], "o-", label="NN evals/s")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("search threads (katago benchmark)")
        ax.set_ylabel("NN evaluations / s")
        ax.legend()
        ax.set_title("katago benchmark")
        save(fig, "benchmark.png")
    jobs = [row for name in ("line", "wide") if (s := _step(q, name)) for row in s.data.get("jobs", [])]
    done = [row for row in jobs if row.get("req_per_s")]
    if done:
        fig, ax = plt.subplots(figsize=(8, 0.5 * len(done) + 1.5))
        ax.barh([row["job"][:60] for row in done], [row["req_per_s"] for row in done], color="tab:blue")
        for i, row in enumerate(done):
            ax.text(row["req_per_s"], i, f" MFU {_fmt(row.get('mfu'), '.2f')} {row.get('bottleneck', '')}", va="center")
        ax.set_xlabel("analyses / s")
        ax.invert_yaxis()
        ax.set_title("sweep jobs (line and wider sweep)")
        save(fig, "jobs.png")
    return written


def write_report(q: Qualification) -> Path:
    head = headline(q)
    data = {
        "options": {
            **{k: str(v) for k, v in asdict(q.options).items() if k != "scale"},
            "scale": asdict(q.options.scale),
        },
        "facts": q.facts,
        "katago_version": q.katago_version,
        "headline": head,
        "steps": [asdict(r) for r in q.records],
    }
    q.out.mkdir(parents=True, exist_ok=True)
    (q.out / "results.json").write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    try:
        _plots(q, q.out / "plots")
    except Exception as exc:  # a plot is never worth the report
        (q.out / "plots-error.txt").write_text(f"{type(exc).__name__}: {exc}\n", encoding="utf-8")
    report = q.out / "report.md"
    report.write_text(_markdown(q, head), encoding="utf-8")
    return report
