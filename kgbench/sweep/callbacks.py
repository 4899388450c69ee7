"""A sweep's MLflow parent run, opened once its jobs are known, and the Hydra callback that opens and closes it.

kgbench's grid sweeper opens it after its preflight (kgbench.sweep.preflight: a sweep none of whose jobs can start
records nothing); for any other sweeper the callback opens it when the multirun starts. The parent run id, the sweep
id, its experiment and the expected job count reach the jobs through environment variables (KGBENCH_PARENT_RUN_ID,
KGBENCH_SWEEP_ID, KGBENCH_EXPERIMENT, KGBENCH_SWEEP_JOBS), so any launcher works. kgbench.sweep.sweep_end summarises
the sweep at its end. Nothing here may raise: Hydra would print a traceback and skip the rest of the sweep.
"""

from __future__ import annotations

import math
import os
import sys
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from kgbench.sweep import progress, state, sweep_end
from kgbench.sweep.labels import BOOKKEEPING, display_overrides  # light: kgbench.__main__ uses them without MLflow
from kgbench.track import store_errors, tracking
from kgbench.track.reaper import reap_dead_runs
from kgbench.track.schema import SKIPPED_JOBS
from kgserve.engine.client import is_simulated

__all__ = [
    "BOOKKEEPING",
    "ENV_EXPERIMENT",
    "ENV_JOBS",
    "ENV_JOB_KEY",
    "ENV_PARENT",
    "ENV_SWEEP",
    "KgbenchCallback",
    "count_jobs",
    "display_overrides",
    "open_sweep",
]

ENV_PARENT = "KGBENCH_PARENT_RUN_ID"
ENV_SWEEP = "KGBENCH_SWEEP_ID"
ENV_JOBS = "KGBENCH_SWEEP_JOBS"
ENV_EXPERIMENT = "KGBENCH_EXPERIMENT"
ENV_JOB_KEY = "KGBENCH_JOB_KEY"  # set by a remote launcher: finds the run of a job whose process was lost
_SWEEP_ENV = (ENV_PARENT, ENV_SWEEP, ENV_JOBS, ENV_EXPERIMENT)


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


def open_sweep(
    config: DictConfig, jobs: int | None, *, simulated: bool, skipped: Sequence[tuple[str, str]] = ()
) -> str | None:
    """The sweep's parent run (in kgbench-sim when every job runs the simulated engine, unless mlflow.experiment
    names one), its environment for the jobs and its progress bar. `skipped`: (job, why) the preflight left out.
    Returns the line that says why the store cannot take the sweep (full, damaged, unreachable), after printing it;
    None when the parent run is open (or failed otherwise: the jobs record themselves)."""
    try:
        overrides = list(config.hydra.overrides.task)
        sweep_id = f"{datetime.now(UTC):%Y-%m-%d_%H-%M-%S}-{uuid.uuid4().hex[:6]}"
        os.environ[ENV_SWEEP] = sweep_id
        if jobs:
            os.environ[ENV_JOBS] = str(jobs)
        tracking.use_configured_uri(config.mlflow.get("tracking_uri"))
        client = tracking.make_client()
        experiment = tracking.experiment_for(config.mlflow.get("experiment"), simulated)
        tags = {SKIPPED_JOBS: " | ".join(f"{job}: {why}" for job, why in skipped)[:5000]} if skipped else {}
        parent = tracking.create_sweep_run(client, experiment, sweep_id, display_overrides(overrides), tags)
        experiment_id = tracking.ensure_experiment(client, experiment)
        for run_id, reason in reap_dead_runs(client, [experiment_id], "the next sweep"):
            _note(f"marked run {run_id} KILLED: {reason}")
        os.environ[ENV_PARENT] = parent
        os.environ[ENV_EXPERIMENT] = experiment
        state.set_sweep_run(state.SweepRun(parent, experiment_id, sweep_id, tuple(skipped)))
        _note(f"sweep {sweep_id}: MLflow parent run {parent} in experiment {experiment} at {tracking.tracking_uri()}")
        progress.start_sweep(jobs)
    except Exception as exc:
        if (error := store_errors.store_error(exc, tracking.tracking_uri())) is not None:
            line = f"cannot open the sweep: {error}"
            _note(line)
            return line
        _note(f"cannot create the MLflow parent run: {type(exc).__name__}: {exc}")
    return None


def _end_parent(sweep: state.SweepRun | None) -> None:
    """The parent run FAILED when its summary could not be written: never RUNNING for good, if the store lets it."""
    if sweep is None:
        return
    try:
        tracking.finish_run(tracking.make_client(), sweep.parent_run_id, False)
    except Exception as exc:
        error = store_errors.store_error(exc, tracking.tracking_uri())
        _note(f"the sweep's parent run {sweep.parent_run_id} stays RUNNING: {error or type(exc).__name__}")


class KgbenchCallback(Callback):
    """The multirun's hooks, through kgbench.sweep.lazy_callback.LazyKgbenchCallback (conf/config.yaml), which resets
    the sweep's state at its start and calls `on_multirun_start` only for a sweeper that does not open the sweep
    itself (kgbench.sweep.lazy_callback.OPEN_THEMSELVES)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweeper = str(config.hydra.sweeper.get("_target_", ""))
        try:
            overrides = list(config.hydra.overrides.task)
            grid = "BasicSweeper" in sweeper
            jobs = count_jobs(overrides, config.hydra.sweeper.get("params")) if grid else None
            jobs = jobs or config.hydra.sweeper.get("n_trials")
        except Exception:
            jobs = None
        open_sweep(config, jobs, simulated=is_simulated(str(config.get("backend", ""))))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            progress.stop_sweep()
            sweep_end.summarise(state.sweep_run(), Path(str(config.hydra.sweep.dir)))
        except Exception as exc:
            error = store_errors.store_error(exc, tracking.tracking_uri())
            line = f"cannot summarise the sweep: {error or f'{type(exc).__name__}: {exc}'}"
            _note(" ".join(line.split()))
            if error is not None:  # the exit status says so, and the parent run is ended when the store lets it
                state.fail(str(error))
                _end_parent(state.sweep_run())
        finally:
            for name in _SWEEP_ENV:
                os.environ.pop(name, None)
