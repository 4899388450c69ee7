"""The end of a sweep, read back from MLflow: the table of its jobs (best req/s first), the jobs its preflight
skipped, what its jobs started from, its best job with its interval and why (the promote rule's decision, in
promote's one-line words) and the command that promotes it, and the way into `mlflow ui`. The sweep's parent run
gets the table, the Pareto plot and the throughput-vs-concurrency plot of every job as artifacts (the report,
kgbench.decide.report), its best figure and its status.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from mlflow.entities import Run

from kgbench.decide import runs as runlib
from kgbench.decide.nets import CHOICE_NOTE, net_bests
from kgbench.decide.report import write_report
from kgbench.decide.runtimes import promote_command, shown_path
from kgbench.decide.selection import choose_winner, objective_for
from kgbench.decide.verdict import verdict_line
from kgbench.sweep import state
from kgbench.track import store_errors, summary, tracking
from kgbench.track.coldstart import cold_start
from kgbench.track.mlflow_ui import runs_url
from kgbench.track.reaper import mark_killed

__all__ = ["end_interrupted", "summarise"]


def _note(message: str) -> None:
    print(f"kgbench: {message}", file=sys.stderr, flush=True)


def _best_lines(runs: list[Run]) -> list[str]:
    """The best job by promote's rule (simulated and synthetic runs allowed: the sweep ran them) and how to promote
    it; when no job qualifies, why not. With several networks, each net's best job: promote chooses within one."""
    bests = net_bests(runs)
    if len(bests) > 1:
        lines = [f"{len(bests)} networks side by side: {CHOICE_NOTE}"]
        for nb in bests:
            best = nb.best
            if best is None:
                lines.append(f"{nb.net}: no job qualifies")
                continue
            lines.append(f"{nb.net}: {verdict_line(nb.selection, 'best job is')}")
            lines.append(f"  promote it: {promote_command(best)} --run {best.info.run_id}")
        return lines
    cands = runlib.candidates(runs)  # ranked by their traffic's objective (turns/s for review traffic)
    selection = choose_winner(cands, allow_simulated=True, allow_synthetic=True, objective=objective_for(cands))
    if selection.winner is None:
        reasons = sorted({v.reason for v in selection.verdicts if v.reason})
        return [f"no job qualifies for promotion ({'; '.join(reasons[:4]) or 'no jobs'})"]
    winner = next(run for run in runs if run.info.run_id == selection.winner.run_id)
    return [verdict_line(selection, "best job is"), f"promote it: {promote_command(winner)}"]


def summarise(sweep: state.SweepRun | None, sweep_dir: Path) -> None:
    """Print the sweep's end and record it in its parent run (nothing when the sweep was never opened)."""
    if sweep is None:
        return
    client = tracking.make_client()
    runs = summary.child_runs(client, sweep.experiment_id, sweep.parent_run_id)
    for run_id, overhead in summary.overheads(runs).items():
        tracking.JobRun(client, run_id).log_metrics({"overhead": overhead})
    runs = summary.child_runs(client, sweep.experiment_id, sweep.parent_run_id)
    frame = summary.sweep_table(runs)
    succeeded = int((frame["status"] == "FINISHED").sum()) if not frame.empty else 0
    state.set_sweep_result(total=len(frame), succeeded=succeeded)
    text = summary.format_table(frame)
    lines = [f"kgbench sweep: {len(frame)} job(s), sorted by {frame.attrs.get('sorted_by', 'req/s')}", text]
    if sweep.skipped:
        lines.append(f"skipped before start: {len(sweep.skipped)} job(s): {summary.skipped_text(sweep.skipped)}")
    start = cold_start(runs)
    lines += [line.removeprefix("- ") for line in start.lines()]
    lines += _best_lines(runs)
    print("\n" + "\n".join(lines) + "\n", flush=True)

    parent = client.get_run(sweep.parent_run_id)
    report_dir = sweep_dir / "report"
    try:
        write_report(client, parent, report_dir, artifact_path=None)
        (report_dir / "summary.txt").write_text(text + "\n", encoding="utf-8")
        client.log_artifact(sweep.parent_run_id, str(report_dir / "summary.txt"))
        where = f"the sweep's parent run and {shown_path(report_dir)}/"
        print(f"kgbench: the table, the Pareto plot and req/s against concurrency of every job: {where}", flush=True)
    except Exception as exc:  # the plots are a view: the sweep and its runs stand without them
        error = store_errors.store_error(exc, tracking.tracking_uri(), report_dir)
        _note(" ".join(f"cannot write the sweep's report: {error or f'{type(exc).__name__}: {exc}'}".split()))
    url = runs_url(sweep.experiment_id, tracking.tracking_uri())
    print(f"kgbench: the runs in `mlflow ui` (started in this folder; this link opens them): {url}", flush=True)
    parent_run = tracking.JobRun(client, sweep.parent_run_id)
    for column, metric in (("req/s", "best_req_per_s"), ("turns/s", "best_turns_per_s")):
        best = frame[column].max() if not frame.empty and column in frame else math.nan
        if math.isfinite(best):
            parent_run.log_metrics({metric: float(best)})
    if start.from_ledger:  # the sweep-level count: positions sent twice over all its jobs
        parent_run.log_metrics({"positions_sent": start.sent, "position_repeats": start.repeats})
    tracking.finish_run(client, sweep.parent_run_id, succeeded > 0)
    if succeeded == 0:
        _note("no job of this sweep succeeded (see the reasons above)")
    print(summary.contended_line(runs), flush=True)  # the sweep's last line


def end_interrupted(sweep: state.SweepRun | None, reason: str) -> None:
    """A sweep stopped by a signal (kgbench.sweep.interrupt): every run of it still RUNNING (the job's own run is
    marked by the job; one opened a moment before the signal is not) and its parent run marked KILLED with the
    reason. Never raises: the process is on its way out."""
    if sweep is None:
        return
    try:
        client = tracking.make_client()
        for run in summary.child_runs(client, sweep.experiment_id, sweep.parent_run_id):
            if run.info.status == "RUNNING":
                mark_killed(client, run.info.run_id, reason)
        mark_killed(client, sweep.parent_run_id, reason)
        _note(f"sweep {sweep.sweep_id} stopped: its parent run {sweep.parent_run_id} marked KILLED ({reason})")
    except Exception as exc:
        _note(f"cannot mark the stopped sweep's runs: {type(exc).__name__}: {exc} (the next sweep, promote or report "
              "marks them, kgbench.track.reaper)")  # fmt: skip
