"""kgserve as a subprocess (`python -m kgserve` with the job's config) as a job's target: the load goes over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kgbench.load.generator import run_load
from kgbench.load.kinds import Traffic
from kgbench.load.types import HttpTarget, LevelHook, LoadResult, LoadSettings, Progress
from kgbench.targets.base import Note
from kgbench.targets.faults import Fault, restart_faults, target_gone
from kgbench.targets.kgserve_process import KgserveProcess

__all__ = ["KgserveTarget"]


class KgserveTarget:
    """kgserve serving `config`, its log (the engines' stderr included) in `log_path`."""

    name = "kgserve"

    def __init__(self, config: Path, log_path: Path) -> None:
        self.proc = KgserveProcess(config, log_path)
        self._faults: list[Fault] = []

    @property
    def where(self) -> str:
        return self.proc.url or "kgserve (not listening)"

    def start(self, timeout_s: float, note: Note) -> tuple[float, Mapping[str, Any]]:
        self.proc.start()
        return self.proc.wait_ready(timeout_s, note=note)

    def measure(
        self, load: LoadSettings, queries: Traffic, progress: Progress | None, on_level: LevelHook | None
    ) -> LoadResult:
        assert self.proc.url is not None and self.proc.proc is not None
        _, before = self.proc.get_json("/readyz")
        result = asyncio.run(run_load(HttpTarget(self.proc.url), load, queries, progress, on_level))
        code = self.proc.proc.poll()
        if code is not None:
            self._faults = [target_gone("kgserve", code)]
        else:
            self._faults = restart_faults(before, self.proc.get_json("/readyz")[1])
        return result

    def faults(self) -> list[Fault]:
        return list(self._faults)

    def stop(self, grace_s: float) -> None:
        self.proc.stop(grace_s)

    def engine_log(self) -> str:
        return self.proc.text()

    def frontend_pid(self) -> int | None:
        return self.proc.proc.pid if self.proc.proc is not None else None
