"""What a job's load is sent to: one small interface over kgserve as a subprocess (kgbench.targets.http:
KgserveTarget) and its engine pool in this process (kgbench.targets.direct: PoolTarget), so the sweep measures
both the same way.

A target is started (`start`: seconds to ready and its readiness document, /readyz or the pool's status), loaded
(`measure`), stopped, and its engines' stderr read afterwards (`engine_log`, lines as kgserve logs them:
kgserve.engine.process.stderr_line), for `Unused key` warnings and NN statistics (kgbench.targets.enginelog).
A target that cannot start raises TargetError with a one-line reason; one that faulted while measured says so after
(`faults`: kgbench.targets.faults).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kgbench.load.kinds import Traffic
from kgbench.load.types import LevelHook, LoadResult, LoadSettings, Progress
from kgbench.targets.faults import Fault

__all__ = ["Note", "Target", "TargetError"]

Note = Callable[[str], None]  # a progress line


class TargetError(RuntimeError):
    """The target did not start or did not get ready; the message is the one-line reason."""


class Target(Protocol):
    name: str  # for progress lines: "kgserve", "the engines"

    @property
    def where(self) -> str:
        """Where the load goes once started: kgserve's URL, "the direct pipe"."""
        ...

    def start(self, timeout_s: float, note: Note) -> tuple[float, Mapping[str, Any]]:
        """Start and wait until ready: (seconds it took, the readiness document). TargetError when it cannot."""
        ...

    def measure(
        self, load: LoadSettings, queries: Traffic, progress: Progress | None, on_level: LevelHook | None
    ) -> LoadResult:
        """Every level of `load` against the started target (kgbench.load.generator)."""
        ...

    def faults(self) -> list[Fault]:
        """What went wrong in the target during the last `measure` (an engine restarted, the target gone)."""
        ...

    def stop(self, grace_s: float) -> None: ...

    def engine_log(self) -> str:
        """The engines' stderr lines so far (kgserve.engine.process.stderr_line's form)."""
        ...

    def frontend_pid(self) -> int | None:
        """The serving front end's process (for the host sampler), None when the engines run in this process."""
        ...
