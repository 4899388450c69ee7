"""What this process's sweep is and what its jobs achieved: the sweep's MLflow parent run once it is opened, a
preflight's refusal, a store or folder that failed, and the exit status of `python -m kgbench` (0: at least one job
ok, or no job at all as with --help; 1: no job succeeded, or the store or the multirun folder failed; 2: refused
before any job, nothing recorded)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "SweepRun",
    "exit_status",
    "fail",
    "failed",
    "record_job",
    "refuse",
    "refused",
    "reset",
    "set_sweep_result",
    "set_sweep_run",
    "sweep_run",
]


@dataclass(frozen=True)
class SweepRun:
    parent_run_id: str
    experiment_id: str
    sweep_id: str
    skipped: tuple[tuple[str, str], ...] = ()  # (job, why) the preflight left out


_jobs: list[bool] = []
_sweep: dict[str, int] = {}
_run: list[SweepRun] = []
_refusal: list[str] = []
_faults: list[str] = []


def reset() -> None:
    _jobs.clear()
    _sweep.clear()
    _run.clear()
    _refusal.clear()
    _faults.clear()


def record_job(ok: bool) -> None:
    _jobs.append(ok)


def set_sweep_result(total: int, succeeded: int) -> None:
    _sweep.update(total=total, succeeded=succeeded)


def set_sweep_run(run: SweepRun | None) -> None:
    _run.clear()
    _run.extend([run] if run is not None else [])


def sweep_run() -> SweepRun | None:
    return _run[0] if _run else None


def refuse(message: str) -> None:
    """Nothing ran: every job would have failed the same way (kgbench.sweep.preflight)."""
    _refusal.append(message)


def fail(message: str) -> None:
    """The sweep could not finish as planned (its store or its folder failed): exit 1 even if a job succeeded."""
    _faults.append(message)


def failed() -> bool:
    """The sweep's store or folder failed (`fail`): nothing more is launched (no race of its contenders)."""
    return bool(_faults)


def refused() -> bool:
    return bool(_refusal)


def exit_status() -> int:
    if _refusal:
        return 2
    if _faults:
        return 1
    if _sweep:  # the sweep summary read from MLflow wins (jobs may have run in other processes)
        return 0 if _sweep["succeeded"] > 0 else 1
    if not _jobs:  # nothing ran (--help, --cfg job, ...)
        return 0
    return 0 if any(_jobs) else 1
