"""The dask-jobqueue `PBSCluster` of a sweep, built from runtime/config.yaml `cluster:` (resources) and
`cluster.sweep:` (node count, walltime, worker environment). One PBS job = one dask worker with one thread on
one GPU node, so a node runs one kgbench job at a time and its measurements are not shared with another job."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgserve.paths import PROJECT_ROOT
from kgserve.settings import ClusterSettings

__all__ = ["PBSOptions", "cluster_kwargs", "resource_spec"]


@dataclass(frozen=True)
class PBSOptions:
    """What conf/hydra/launcher/pbs.yaml may set on top of the runtime config (null: the runtime config's)."""

    max_nodes: int | None = None
    scheduler_host: str | None = None  # address the scheduler binds (null: dask's default; 127.0.0.1 in tests)
    interface: str | None = None
    worker_extra_args: list[str] = field(default_factory=list)
    scheduler_options: dict[str, Any] = field(default_factory=dict)
    death_timeout_s: float = 120.0  # a worker whose scheduler is gone this long exits (and frees its node)


def resource_spec(cluster: ClusterSettings) -> str:
    return f"select=1:ncpus={cluster.cpus}:ngpus={cluster.gpus}:mem={cluster.memory}"


def worker_prologue(cluster: ClusterSettings, repo: Path = PROJECT_ROOT) -> list[str]:
    """Run the worker in this checkout (it unpickles kgbench's job function), then the configured lines."""
    where = shlex.quote(str(repo))
    return [f"cd {where}", f'export PYTHONPATH={where}"${{PYTHONPATH:+:$PYTHONPATH}}"', *cluster.sweep.prologue]


def cluster_kwargs(cluster: ClusterSettings, options: PBSOptions) -> dict[str, Any]:
    sweep = cluster.sweep
    scheduler_options = dict(options.scheduler_options)
    if options.scheduler_host:
        scheduler_options.setdefault("host", options.scheduler_host)
    return {
        "cores": 1,  # dask threads: one job at a time per node (the node's CPUs go to KataGo, not dask)
        "processes": 1,
        "memory": cluster.memory,
        "queue": cluster.queue,
        "resource_spec": resource_spec(cluster),
        "walltime": sweep.walltime,
        "job_name": "kgbench-sweep",
        "python": sweep.python or sys.executable,
        "job_script_prologue": worker_prologue(cluster),
        "interface": options.interface or sweep.interface,
        "log_directory": sweep.log_directory,
        "death_timeout": options.death_timeout_s,
        "worker_extra_args": list(options.worker_extra_args),
        "scheduler_options": scheduler_options,
    }
