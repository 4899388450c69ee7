"""Hydra callback: one MLflow parent run per multirun, the summary table at its end.

The parent run id, the sweep id and the expected job count reach the jobs through environment variables
(KGBENCH_PARENT_RUN_ID, KGBENCH_SWEEP_ID, KGBENCH_SWEEP_JOBS), so any launcher works. Nothing here may
raise: Hydra would print a traceback and skip the rest of the sweep.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from kgbench.sweep import state
from kgbench.track import summary, tracking
from kgbench.track.coldstart import cold_start
from kgbench.track.mlflow_ui import runs_url

__all__ = [
    "BOOKKEEPING",
    "ENV_JOBS",
    "ENV_JOB_KEY",
    "ENV_PARENT",
    "ENV_SWEEP",
    "KgbenchCallback",
    "count_jobs",
    "display_overrides",
]

ENV_PARENT = "KGBENCH_PARENT_RUN_ID"
ENV_SWEEP = "KGBENCH_SWEEP_ID"
ENV_JOBS = "KGBENCH_SWEEP_JOBS"
ENV_JOB_KEY = "KGBENCH_JOB_KEY"  # set by a remote launcher: finds the run of a job whose process was lost


BOOKKEEPING = ("++search.", "++race.")  # overrides a sweeper adds to link a job to its trial or race round


def display_overrides(overrides: list[str]) -> str:
    """The override string as the user typed it (kgbench adds `++` to plain KataGo keys; the Optuna sweeper's
    `++search.*` trial links and a race's `++race.of/round` are bookkeeping, not configuration)."""
    return " ".join(item.removeprefix("++") for item in overrides if not item.startswith(BOOKKEEPING))


def count_jobs(overrides: list[str], params: Mapping[str, Any] | None = None) -> int | None:
    """Jobs a grid sweeper makes of its `params` (an experiment's sweep) and these overrides.

    As in Hydra's BasicSweeper (kgbench's grid sweeper only reorders its jobs): the params come first, a key given
    again on the command line replaces its entry, and the job count is the product of the sweeps' lengths.
    """
    try:
        params_lines = [f"{key}={value}" for key, value in (params or {}).items()]
        parsed = OverridesParser.create().parse_overrides([*params_lines, *overrides])
        lengths: dict[str, int] = {}
        for override in parsed:
            sweep = override.is_sweep_override()
            lengths[override.get_key_element()] = len(list(override.sweep_string_iterator())) if sweep else 1
        return math.prod(lengths.values())
    except Exception:
        return None


def _note(message: str) -> None:
    print(f"kgbench: {message}", file=sys.stderr, flush=True)


class KgbenchCallback(Callback):
    def __init__(self) -> None:
        self.parent_run_id: str | None = None
        self.experiment_id: str | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        state.reset()
        try:
            overrides = list(config.hydra.overrides.task)
            sweeper = str(config.hydra.sweeper.get("_target_", ""))
            grid = "BasicSweeper" in sweeper or "GroupedSweeper" in sweeper
            jobs = (
                count_jobs(overrides, config.hydra.sweeper.get("params"))
                if grid
                else config.hydra.sweeper.get("n_trials")
            )
            sweep_id = f"{datetime.now(UTC):%Y-%m-%d_%H-%M-%S}-{uuid.uuid4().hex[:6]}"
            os.environ[ENV_SWEEP] = sweep_id
            if jobs:
                os.environ[ENV_JOBS] = str(jobs)
            tracking.use_configured_uri(config.mlflow.get("tracking_uri"))
            client = tracking.make_client()
            experiment = str(config.mlflow.experiment)
            self.parent_run_id = tracking.create_sweep_run(client, experiment, sweep_id, display_overrides(overrides))
            self.experiment_id = tracking.ensure_experiment(client, experiment)
            os.environ[ENV_PARENT] = self.parent_run_id
            _note(f"sweep {sweep_id}: MLflow parent run {self.parent_run_id} at {tracking.tracking_uri()}")
        except Exception as exc:
            _note(f"cannot create the MLflow parent run: {type(exc).__name__}: {exc}")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            self._summarise()
        except Exception as exc:
            _note(f"cannot summarise the sweep: {type(exc).__name__}: {exc}")
        finally:
            for name in (ENV_PARENT, ENV_SWEEP, ENV_JOBS):
                os.environ.pop(name, None)

    def _summarise(self) -> None:
        if self.parent_run_id is None or self.experiment_id is None:
            return
        client = tracking.make_client()
        runs = summary.child_runs(client, self.experiment_id, self.parent_run_id)
        for run_id, overhead in summary.overheads(runs).items():
            client.log_metric(run_id, "overhead", overhead)
        runs = summary.child_runs(client, self.experiment_id, self.parent_run_id)
        frame = summary.sweep_table(runs)
        ok = bool((frame["status"] == "FINISHED").any()) if not frame.empty else False
        state.set_sweep_result(total=len(frame), succeeded=int((frame["status"] == "FINISHED").sum()))
        text = summary.format_table(frame)
        start = cold_start(runs)
        lines = "\n".join(line.removeprefix("- ") for line in start.lines())
        print(f"\nkgbench sweep: {len(frame)} job(s), sorted by req/s\n{text}\n{lines}\n", flush=True)
        print(f"kgbench: the runs in `mlflow ui`: {runs_url(self.experiment_id, tracking.tracking_uri())}", flush=True)
        best = frame["req/s"].max() if not frame.empty else math.nan
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "summary.txt"
            path.write_text(text + "\n")
            frame.to_csv(Path(tmp) / "summary.csv", index=False)
            client.log_artifact(self.parent_run_id, str(path))
            client.log_artifact(self.parent_run_id, str(Path(tmp) / "summary.csv"))
        if math.isfinite(best):
            client.log_metric(self.parent_run_id, "best_req_per_s", float(best))
        if start.from_ledger:  # the sweep-level count: positions sent twice over all its jobs
            client.log_metric(self.parent_run_id, "positions_sent", float(start.sent))
            client.log_metric(self.parent_run_id, "position_repeats", float(start.repeats))
        tracking.finish_run(client, self.parent_run_id, ok)
        if not ok:
            _note("no job of this sweep succeeded (see the reasons above)")
        print(summary.contended_line(runs), flush=True)  # the sweep's last line
