"""What this process's jobs achieved, for the exit status of `python -m kgbench` (0: at least one job ok,
or no job at all as with --help)."""

from __future__ import annotations

__all__ = ["exit_status", "record_job", "reset", "set_sweep_result"]

_jobs: list[bool] = []
_sweep: dict[str, int] = {}


def reset() -> None:
    _jobs.clear()
    _sweep.clear()


def record_job(ok: bool) -> None:
    _jobs.append(ok)


def set_sweep_result(total: int, succeeded: int) -> None:
    _sweep.update(total=total, succeeded=succeeded)


def exit_status() -> int:
    if _sweep:  # the sweep summary read from MLflow wins (jobs may have run in other processes)
        return 0 if _sweep["succeeded"] > 0 else 1
    if not _jobs:  # nothing ran (--help, --cfg job, ...)
        return 0
    return 0 if any(_jobs) else 1
