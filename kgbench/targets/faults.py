"""What went wrong in a job's target while it was measured, beside the load generator's errors: an engine that
exited and was restarted (kgserve's supervisor restarts it, so later levels may be clean and the figure look fine),
or kgserve itself gone. Read from the readiness document (/readyz, or the pool's status) before and after the
measurement: each engine slot counts its restarts and keeps why its last engine ended.

A job with a fault keeps its figures for the record (kgbench.faults), and promote never chooses it
(kgbench.decide.selection); a fatal one (kgserve gone) fails the job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kgserve.engine.errors import exit_how

__all__ = ["Fault", "faults_text", "restart_faults", "target_gone"]


@dataclass(frozen=True)
class Fault:
    what: str  # one line
    fatal: bool = False  # the target itself is gone: the job's figures do not measure its config


def _engines(status: Mapping[str, Any]) -> dict[int, tuple[int, int | None]]:
    """Each slot's (restarts, live engine pid)."""
    return {
        int(e.get("index", i)): (int(e.get("restarts") or 0), e.get("pid"))
        for i, e in enumerate(status.get("engines") or [])
    }


def restart_faults(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Fault]:
    """One fault per engine slot whose engine ended between the two readiness documents (its restart count grew,
    or its engine is another process, or none: still in its restart back-off), with why it ended."""
    earlier = _engines(before)
    faults = []
    for index, (restarts, pid) in _engines(after).items():
        was_restarts, was_pid = earlier.get(index, (restarts, pid))
        if restarts == was_restarts and pid == was_pid:
            continue
        slot = next(e for i, e in enumerate(after.get("engines") or []) if int(e.get("index", i)) == index)
        why = slot.get("last_error") or "no reason recorded"
        count = max(1, restarts - was_restarts)
        faults.append(Fault(f"engine[{index}] ended {count} time(s) during the measurement and was restarted ({why})"))
    return faults


def target_gone(name: str, code: int) -> Fault:
    return Fault(f"{name} exited during the measurement ({exit_how(code)}): the later levels measured nothing", True)


def faults_text(faults: list[Fault]) -> str:
    return " | ".join(f.what for f in faults)
