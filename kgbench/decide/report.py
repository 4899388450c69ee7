"""`python -m kgbench.report [--sweep ID] [--experiment NAME] [--out DIR]`: a sweep as a table and pictures.

Writes to DIR (default kgbench-reports/<sweep id>) and logs to the sweep's parent run under `report/`:
  runs.csv                       one row per run: backend, network (when the sweep ran several), swept keys,
                                 req/s with its 95% interval, goodput, the knee, visits/s, NN evals/s and MFU
                                 (where measured), p50, p99, errors, NN avg batch size, GPU utilisation,
                                 engine start-up (with TensorRT: the engine build), status and flags
  nets.csv                       with several networks: one row per net, its best run's req/s, NN evals/s, MFU
  pareto.png                     req/s against p99 per backend (Pareto fronts, error bars, the winner circled)
  throughput_vs_concurrency.png  req/s per concurrency level per run, error bars, knees marked
                                 (mode=engine: visits/s per thread count)
  summary.md                     the table in Markdown, the winner under the promote rule (one per network:
                                 promote chooses within one), the networks side by side, the pictures
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from kgbench.decide import runs as runlib
from kgbench.decide.baseline import baseline_text
from kgbench.decide.nets import CHOICE_NOTE, net_bests, net_of, nets_frame
from kgbench.decide.reportplots import concurrency_plot, pareto_plot
from kgbench.decide.selection import RULE, Selection
from kgbench.track.coldstart import ColdStart, cold_start
from kgbench.track.schema import BACKEND, BUILD_GROUP, PROMOTED, SIMULATED, TRT_CACHE, tracking_uri
from kgbench.track.store_errors import store_error
from kgserve.paths import PROJECT_ROOT

__all__ = ["Report", "build_table", "main", "markdown_table", "write_report"]

METRIC_COLUMNS = (
    "req_per_s",
    "req_per_s_ci_low",
    "req_per_s_ci_high",
    "turns_per_s",
    "turn_p50_ms",
    "nn_rows_per_visit",
    "goodput_per_s",
    "slo_ms",
    "knee_concurrency",
    "visits_per_s",
    "p50_ms",
    "p99_ms",
    "errors",
    "nn_avg_batch_size",
    "gpu_util_mean",
    "engine_start_s",
)
ENGINE_COLUMNS = ("recommended_threads", "max_visits_per_s")  # mode=engine only: shown when present
EFFICIENCY_COLUMNS = ("nn_evals_per_s", "mfu")  # kgbench.track.efficiency: shown when some run measured them
LEVEL_SERIES = ("level_req_per_s", "concurrency (queries in flight)", "throughput (req/s)")
ENGINE_SERIES = ("bench_visits_per_s", "search threads (katago benchmark)", "visits/s")


@dataclass(frozen=True)
class Report:
    out_dir: Path
    table: pd.DataFrame
    files: dict[str, Path]
    winner: str | None


def _short(key: str) -> str:
    return key.split(".", 1)[-1] if key.startswith(runlib.SWEPT_PARAM_PREFIXES) else key


def _selections(runs: list[Run]) -> list[Selection]:
    """The promote rule's choice (simulated runs allowed, no SLO) within each network the runs ran."""
    return [nb.selection for nb in net_bests(runs, allow_synthetic=False)]


def build_table(runs: list[Run], selection: Selection | None = None) -> pd.DataFrame:
    """One row per run, best first by the rule's objective (turns/s for traffic that counts turns, else req/s); the
    swept keys as columns; `winner` marks the promote rule's choice (simulated runs allowed, no SLO), one per network
    when the runs ran several."""
    keys = [k for k in runlib.swept_keys(runs) if k != "backend"]
    selections = [selection] if selection is not None else _selections(runs)
    winners = {s.winner.run_id for s in selections if s.winner}
    verdicts = {v.candidate.run_id: v.reason for s in selections for v in s.verdicts}
    several = len({net_of(run) for run in runs}) > 1
    by_turns = any(s.objective == "turns_per_s" for s in selections)  # the runs' traffic counts turns
    rows = []
    for run in runs:
        tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
        row: dict[str, object] = {
            "run": run.info.run_id[:8],
            "backend": tags.get(BACKEND) or params.get("backend", ""),
        }
        if several:
            row["net"] = net_of(run)
        row.update({_short(k): params.get(k) for k in keys})
        row.update({m: metrics.get(m) for m in (*METRIC_COLUMNS, *EFFICIENCY_COLUMNS, *ENGINE_COLUMNS)})
        row.update(
            {
                "trt_cache": tags.get(TRT_CACHE),
                "build_group": tags.get(BUILD_GROUP),
                "repeat_rate": metrics.get("position_repeat_rate"),
                "status": run.info.status,
                "simulated": tags.get(SIMULATED) == "true",
                "promoted": tags.get(PROMOTED) == "true",
                "verdict": "winner" if run.info.run_id in winners else (verdicts.get(run.info.run_id) or "eligible"),
                "winner": run.info.run_id in winners,
                "label": runlib.label_of(run, keys),
                "run_id": run.info.run_id,
            }
        )
        rows.append(row)
    table = pd.DataFrame(rows)
    for column in (*METRIC_COLUMNS, *EFFICIENCY_COLUMNS, *ENGINE_COLUMNS):
        if column in table.columns:
            table[column] = pd.to_numeric(table[column], errors="coerce")
    optional = (*EFFICIENCY_COLUMNS, *ENGINE_COLUMNS, "trt_cache", "build_group")
    table = table.drop(columns=[c for c in optional if c in table.columns and table[c].isna().all()])
    if not table.empty:  # best first by the rule's objective (turns/s for review, interactive or mixed traffic)
        first = "turns_per_s" if by_turns and "turns_per_s" in table else "req_per_s"
        table = table.sort_values([first, "visits_per_s"], ascending=False, na_position="last", kind="stable")
    return table.reset_index(drop=True)


def _cell(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return str(value).replace("|", "\\|")


def markdown_table(table: pd.DataFrame, columns: list[str]) -> str:
    cols = [c for c in columns if c in table.columns]
    if table.empty or not cols:
        return "(no job run in this sweep)"
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, row in table.iterrows():
        lines.append("| " + " | ".join(_cell(row[c]) for c in cols) + " |")
    return "\n".join(lines)


def _series(client: MlflowClient, runs: list[Run], key: str) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {}
    for run in runs:
        history = client.get_metric_history(run.info.run_id, key)
        if history:
            out[run.info.run_id] = {int(m.step): float(m.value) for m in history}
    return out


def _nets_section(nets: pd.DataFrame) -> list[str]:
    """The networks side by side (several in one sweep), and why promote does not choose between them."""
    if len(nets) < 2:
        return []
    return [
        "## Networks",
        "",
        f"{CHOICE_NOTE}. Each net's best run by promote's rule (synthetic nets included: their cost is the real "
        "layout's), fastest first:",
        "",
        markdown_table(nets, list(nets.columns)),
        "",
    ]


def _summary(
    sweep_id: str,
    parent: Run,
    table: pd.DataFrame,
    columns: list[str],
    winner: str | None,
    decision: str | None,
    start: ColdStart,
    nets: pd.DataFrame | None = None,
    baseline: str | None = None,
) -> str:
    simulated = bool(table["simulated"].any()) if not table.empty else False
    lines = [
        f"# kgbench sweep {sweep_id}",
        "",
        f"- parent run: `{parent.info.run_id}` (experiment {parent.info.experiment_id})",
        f"- report written: {datetime.now(UTC).isoformat(timespec='seconds')}",
        f"- runs: {len(table)} ({int((table['status'] == 'FINISHED').sum()) if not table.empty else 0} finished)",
        f"- promote rule: {RULE}",
        *start.lines(),
    ]
    if simulated:
        lines.append("- **SIMULATED**: some runs used kgserve.sim, not KataGo on a GPU; their numbers are not real.")
    several = "net" in table.columns
    for run_id in table.loc[table["winner"], "run_id"] if several else ([winner] if winner else []):
        row = table[table["run_id"] == run_id].iloc[0]
        within = f" of net `{row['net']}`" if several else ""
        lines.append(
            f"- winner under the rule (no SLO){within}: `{run_id}` backend **{row['backend']}** {row['label']} "
            f"- {_cell(row['req_per_s'])} req/s, {_cell(row.get('turns_per_s'))} turns/s, "
            f"p99 {_cell(row['p99_ms'])} ms "
            f"(`python -m kgbench.promote --sweep {sweep_id}`{' --run ' + str(run_id) if several else ''})"
        )
    if winner and decision and not several:
        lines.append(f"- decision: {decision}")
    if baseline:
        lines.append(f"- against the users' own grid: {baseline}")
    if several:
        lines.append(f"- several networks: {CHOICE_NOTE}")
    if not winner and not (several and table["winner"].any()):
        lines.append("- no run satisfies the promote rule")
    lines += ["", *_nets_section(nets if nets is not None else pd.DataFrame())]
    lines += [
        "## Runs",
        "",
        markdown_table(table, columns),
        "",
        "## Throughput against p99 latency",
        "",
        "![pareto](pareto.png)",
        "",
        "## Throughput against concurrency",
        "",
        "![throughput vs concurrency](throughput_vs_concurrency.png)",
        "",
    ]
    return "\n".join(lines)


def _served_best(table: pd.DataFrame, winner: str | None) -> str | None:
    """The run put beside the users' own grid: the rule's winner, else the best finished run without errors (a
    synthetic net's, which promote never chooses, still measures the layout's speed)."""
    if winner or table.empty:
        return winner
    clean = table[(table["status"] == "FINISHED") & (table["errors"].fillna(0) == 0)]
    return str(clean["run_id"].iloc[0]) if not clean.empty else None


def write_report(
    client: MlflowClient, parent: Run, out_dir: Path, log_to_mlflow: bool = True, artifact_path: str | None = "report"
) -> Report:
    """The report's files in `out_dir`, logged to the sweep's parent run under `artifact_path` (None: at its root,
    as the end of a sweep does)."""
    sweep_id = runlib.sweep_id_of(parent)
    runs = runlib.sweep_children(client, parent)
    out_dir.mkdir(parents=True, exist_ok=True)
    selections = _selections(runs)
    selection = selections[0] if len(selections) == 1 else None
    table = build_table(runs, selection)
    winner = str(table.loc[table["winner"], "run_id"].iloc[0]) if not table.empty and table["winner"].any() else None
    shown = [c for c in table.columns if c not in ("winner", "label", "run_id")]
    files = {"csv": out_dir / "runs.csv", "summary": out_dir / "summary.md"}
    table.drop(columns=["label"], errors="ignore").to_csv(files["csv"], index=False)
    nets = nets_frame(net_bests(runs)) if len(selections) > 1 else pd.DataFrame()
    if not nets.empty:
        files["nets"] = out_dir / "nets.csv"
        nets.to_csv(files["nets"], index=False)
    files["pareto"] = pareto_plot(table, out_dir / "pareto.png", f"sweep {sweep_id}: req/s vs p99")
    key, xlabel, ylabel = LEVEL_SERIES
    series = _series(client, runs, key)
    lows, highs = _series(client, runs, "level_req_per_s_ci_low"), _series(client, runs, "level_req_per_s_ci_high")
    bounds = {
        run_id: {step: (low, highs[run_id][step]) for step, low in steps.items() if step in highs.get(run_id, {})}
        for run_id, steps in lows.items()
    }
    knees = {
        str(row["run_id"]): int(row["knee_concurrency"])
        for _, row in table.iterrows()
        if "knee_concurrency" in table.columns and pd.notna(row["knee_concurrency"])
    }
    if not series:
        key, xlabel, ylabel = ENGINE_SERIES
        series = _series(client, runs, key)
    backends = {r.info.run_id: str(r.data.tags.get(BACKEND, "?")) for r in runs}
    labels = {str(row["run_id"]): str(row["label"]) for _, row in table.iterrows()} if not table.empty else {}
    files["concurrency"] = concurrency_plot(
        series, backends, labels, out_dir / "throughput_vs_concurrency.png",
        f"sweep {sweep_id}: {ylabel} vs {xlabel.split(' (')[0]}", xlabel, ylabel, bounds, knees,
    )  # fmt: skip
    files["summary"].write_text(
        _summary(
            sweep_id,
            parent,
            table,
            shown,
            winner,
            selection.decision.explanation if selection is not None and selection.decision else None,
            cold_start(runs),
            nets,
            next((baseline_text(r) for r in runs if r.info.run_id == _served_best(table, winner)), None),
        ),
        encoding="utf-8",
    )
    if log_to_mlflow:
        client.log_artifacts(parent.info.run_id, str(out_dir), artifact_path=artifact_path)
    return Report(out_dir=out_dir, table=table, files=files, winner=winner)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kgbench.report", description=__doc__.split("\n\n")[0])
    p.add_argument("--sweep", help="sweep id (tag kgbench.sweep_id) or parent run id; default: the latest sweep")
    p.add_argument("--experiment", help=runlib.EXPERIMENT_HELP)
    p.add_argument("--out", type=Path, default=None, help="output folder (default kgbench-reports/<sweep>)")
    p.add_argument("--tracking-uri", default=None, help="default: MLFLOW_TRACKING_URI or sqlite:///<repo>/mlflow.db")
    p.add_argument("--no-log", action="store_true", help="do not log the report to the parent run")
    args = p.parse_args(argv)
    try:
        return _report(args)
    except Exception as exc:  # a full, damaged or unreachable store, or a full disk: its one line (a bug: shown)
        if (error := store_error(exc, args.tracking_uri or tracking_uri(), args.out)) is None:
            raise
        print(f"error: {error}; no report", file=sys.stderr)
        return 1


def _report(args: argparse.Namespace) -> int:
    try:
        client = runlib.make_client(args.tracking_uri)
        for line in runlib.mark_dead_runs(client, args.experiment, "report"):
            print(line, file=sys.stderr)
        parent = runlib.find_sweep(client, args.experiment, args.sweep)
    except runlib.SweepNotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    sweep_id = runlib.sweep_id_of(parent)
    out_dir = args.out or (PROJECT_ROOT / "kgbench-reports" / sweep_id.replace("/", "_"))
    report = write_report(client, parent, out_dir, log_to_mlflow=not args.no_log)
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        shown = [c for c in report.table.columns if c not in ("winner", "label", "run_id")]
        print(report.table[shown].to_string(index=False) if not report.table.empty else "(no runs)")
    print(f"\nwinner under the promote rule: {report.winner or 'none'}")
    if not args.no_log:
        print(f"logged to parent run {parent.info.run_id} under report/")
    print(f"report written to {report.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
