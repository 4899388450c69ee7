"""Hydra launcher: each job of a sweep on a GPU node of a PBS cluster, through dask-jobqueue's `PBSCluster`.

    python -m kgbench -m hydra/launcher=pbs mlflow.tracking_uri=http://HOST:5000 backend=cuda,trt nnMaxBatchSize=64,128

At most `cluster.sweep.max_nodes` PBS jobs (dask workers, one job at a time each) run at once; the cluster lives
until the process ends, so a sweeper that launches batches (Optuna) reuses the nodes. A job whose process is
lost (preempted, qdel, walltime, node failure) or that raised is recorded as a FAILED MLflow run here and comes
back as a completed job with value NaN: Hydra's sweepers stop the sweep, and skip on_multirun_end, on a failed
job. Any sweeper works: this only runs the batches it is given.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import shutil
import time
import traceback
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask
from dask_jobqueue import PBSCluster
from distributed import Client, Future
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

from kgbench.sweep import state
from kgbench.sweep.callbacks import ENV_EXPERIMENT, ENV_JOB_KEY, ENV_JOBS, ENV_PARENT, ENV_SWEEP, display_overrides
from kgbench.sweep.pbs.cluster import PBSOptions, cluster_kwargs
from kgbench.sweep.pbs.lost_jobs import record_lost_job
from kgbench.track import tracking
from kgbench.track.schema import BACKEND, HYDRA_OVERRIDES
from kgserve.settings import ConfigError, load_settings

__all__ = ["PBSLauncher", "run_remote"]

log = logging.getLogger(__name__)
# what a job needs from the submitting process's environment (callbacks.py sets the first four)
_PASSED_ENV = (ENV_PARENT, ENV_SWEEP, ENV_JOBS, ENV_EXPERIMENT, "MLFLOW_TRACKING_URI")


def run_remote(
    hydra_context: HydraContext,
    task_function: TaskFunction,
    config: DictConfig,
    singleton_state: dict[Any, Any],
    env: dict[str, str],
) -> JobReturn:
    """On the worker: the same steps as Hydra's basic launcher, in this job's environment."""
    setup_globals()
    Singleton.set_state(singleton_state)
    os.environ.update(env)
    return run_job(
        hydra_context=hydra_context,
        task_function=task_function,
        config=config,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


class PBSLauncher(Launcher):
    def __init__(
        self,
        runtime_config: str | None = None,
        max_nodes: int | None = None,
        scheduler_host: str | None = None,
        interface: str | None = None,
        worker_extra_args: Sequence[str] = (),
        scheduler_options: dict[str, Any] | None = None,
        death_timeout_s: float = 120.0,
        poll_s: float = 2.0,
    ) -> None:
        self.runtime_config = runtime_config
        self.options = PBSOptions(
            max_nodes=max_nodes,
            scheduler_host=scheduler_host,
            interface=interface,
            worker_extra_args=[str(a) for a in _plain(worker_extra_args) or []],
            scheduler_options=dict(_plain(scheduler_options) or {}),
            death_timeout_s=float(death_timeout_s),
        )
        self.poll_s = float(poll_s)
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None
        self._cluster: PBSCluster | None = None
        self._client: Client | None = None
        self._max_nodes = 1
        self._scaled = 0

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    # ---------------------------------------------------------------- the cluster
    def _start_cluster(self) -> Client:
        if self._client is not None:
            return self._client
        if shutil.which("qsub") is None:
            raise FileNotFoundError("qsub is not on PATH: hydra/launcher=pbs runs where PBS jobs can be submitted")
        settings = load_settings(self.runtime_config)
        if settings.cluster is None:
            raise ConfigError(f"{settings.source}: no cluster: section (PBS resources for hydra/launcher=pbs)")
        self._max_nodes = self.options.max_nodes or settings.cluster.sweep.max_nodes
        # a task whose worker died is lost at once (a FAILED run), never re-run on another node: a job that
        # kills its node would otherwise take down max_nodes of them in turn
        dask.config.set({"distributed.scheduler.allowed-failures": 0})
        # dask's INFO lines (every worker joining, every connection) would drown the sweep's progress lines
        self._cluster = PBSCluster(**cluster_kwargs(settings.cluster, self.options), silence_logs="warning")
        self._client = Client(self._cluster)
        atexit.register(self.close)
        log.info(f"PBS cluster: scheduler {self._cluster.scheduler_address}, at most {self._max_nodes} node(s)")
        log.debug("worker job script:\n%s", self._cluster.job_script())
        return self._client

    def _scale(self, pending: int) -> None:
        """Ask for min(max_nodes, pending) workers, never fewer than before: shrinking could pick a busy one.
        Scaling again also replaces a worker the scheduler lost (dask re-opens a spec without a worker)."""
        assert self._cluster is not None
        self._scaled = max(self._scaled, min(self._max_nodes, pending))
        self._cluster.scale(jobs=self._scaled)

    def close(self) -> None:
        """Cancel the PBS jobs (qdel) and stop the scheduler; safe to call twice."""
        client, cluster = self._client, self._cluster
        self._client = self._cluster = None
        self._scaled = 0
        for closeable in (client, cluster):
            if closeable is not None:
                try:
                    closeable.close()
                except Exception as exc:  # at exit: report and go on closing the rest
                    log.warning(f"closing the PBS cluster: {type(exc).__name__}: {exc}")

    def _submissions_failed(self) -> bool:
        """Every PBS job the cluster tried to submit failed (qsub error): no worker will ever come.
        dask-jobqueue keeps a job whose qsub failed, without a job id, and does not submit it again."""
        jobs = list(self._cluster.workers.values()) if self._cluster is not None else []
        return bool(jobs) and all(getattr(job, "job_id", None) is None for job in jobs)

    # ---------------------------------------------------------------- Hydra's entry point
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        setup_globals()
        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        # resolved once here: ${now:...} on a worker would name another folder
        sweep_dir = Path(str(self.config.hydra.sweep.dir)).resolve()
        sweep_dir.mkdir(parents=True, exist_ok=True)
        env = {name: os.environ[name] for name in _PASSED_ENV if os.environ.get(name)}
        sweep_key = os.environ.get(ENV_SWEEP) or uuid.uuid4().hex
        jobs: list[_Job] = []
        for offset, overrides in enumerate(job_overrides):
            idx = initial_job_idx + offset
            sweep_config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
            with open_dict(sweep_config):
                sweep_config.hydra.job.id = idx
                sweep_config.hydra.job.num = idx
                sweep_config.hydra.sweep.dir = str(sweep_dir)
            jobs.append(_Job(idx, list(overrides), sweep_config, f"{sweep_key}/{idx}"))
        try:
            client = self._start_cluster()
        except Exception as exc:  # nothing can run: every job is a FAILED run, the sweep ends normally
            reason = f"cannot start the PBS cluster: {type(exc).__name__}: {exc}"
            return [self._failed(job, env, reason) for job in jobs]
        log.info(f"Launching {len(jobs)} job(s) on PBS, at most {self._max_nodes} node(s) at a time")
        for job in jobs:
            log.info(f"\t#{job.idx} : {' '.join(filter_overrides(job.overrides))}")
            job.future = client.submit(
                run_remote,
                self.hydra_context,
                self.task_function,
                job.config,
                Singleton.get_state(),
                {**env, ENV_JOB_KEY: job.key},
                key=f"kgbench-job-{job.key.replace('/', '-')}",
                pure=False,
            )
        try:
            returns = self._collect(jobs, env)
        except BaseException:  # Ctrl-C or worse: give the nodes back now
            self.close()
            raise
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        return returns

    def _collect(self, jobs: list[_Job], env: dict[str, str]) -> list[JobReturn]:
        results: dict[int, JobReturn] = {}
        while len(results) < len(jobs):
            self._scale(len(jobs) - len(results))
            no_workers = self._submissions_failed()
            for i, job in enumerate(jobs):
                if i in results or job.future is None:
                    continue
                if job.future.done():
                    results[i] = self._job_return(job, env)
                elif no_workers:
                    job.future.cancel()
                    reason = "no PBS job could be submitted for it (qsub failed: its error is logged above)"
                    results[i] = self._failed(job, env, reason)
            if len(results) < len(jobs):
                time.sleep(self.poll_s)
        return [results[i] for i in range(len(jobs))]

    def _job_return(self, job: _Job, env: dict[str, str]) -> JobReturn:
        """The job's own return, or (process lost, job raised) a FAILED run recorded here and a NaN value."""
        assert job.future is not None
        try:
            ret: JobReturn = job.future.result()
        except Exception as exc:
            lost = "the PBS job running it was lost (preempted, deleted, out of walltime or node failure)"
            return self._failed(job, env, f"{lost}: {type(exc).__name__}: {exc}")
        if ret.status is not JobStatus.COMPLETED:
            error = ret._return_value
            if isinstance(error, BaseException):
                log.error("".join(traceback.format_exception(error)))
            return self._failed(job, env, f"the job raised on its node: {type(error).__name__}: {error}")
        state.record_job(_succeeded(ret))
        return ret

    def _failed(self, job: _Job, env: dict[str, str], reason: str) -> JobReturn:
        """Record the job as a FAILED run (its own, if it made one) and hand Hydra a completed NaN job."""
        reason = " ".join(reason.split())
        label = display_overrides(job.overrides) or "defaults"
        log.error(f"job {label}: FAILED: {reason}")
        try:
            record_lost_job(
                tracking.make_client(),
                env.get(ENV_EXPERIMENT) or tracking.experiment_for(job.config.mlflow.get("experiment"), False),
                job_key=job.key,
                label=label,
                reason=reason,
                sweep_id=env.get(ENV_SWEEP),
                parent_run_id=env.get(ENV_PARENT),
                tags={BACKEND: str(job.config.get("backend", "")), HYDRA_OVERRIDES: label},
            )
        except Exception as exc:  # the sweep goes on without this record
            log.error(f"cannot record the failed job in MLflow: {type(exc).__name__}: {exc}")
        state.record_job(False)
        ret = JobReturn(overrides=job.overrides, cfg=job.config, status=JobStatus.COMPLETED)
        ret.return_value = math.nan
        return ret


@dataclass
class _Job:
    idx: int
    overrides: list[str]
    config: DictConfig
    key: str  # kgbench.job_key: how the launcher finds the job's run when its process is lost
    future: Future | None = None


def _succeeded(ret: JobReturn) -> bool:
    value = ret._return_value
    return ret.status is JobStatus.COMPLETED and isinstance(value, (int, float)) and math.isfinite(value)
