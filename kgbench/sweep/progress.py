"""Terminal progress of a job (rich): job i of N, the current level, live req/s and errors.

On a terminal one status line updates in place; otherwise (CI, logs) one line per stage and per finished
level is printed, so the output stays readable.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.markup import escape
from rich.status import Status

from kgbench.load.types import ProgressUpdate

__all__ = ["JobProgress"]


class JobProgress:
    def __init__(
        self, job_index: int | None, job_total: int | None, label: str, console: Console | None = None
    ) -> None:
        self.console = console or Console(stderr=True, highlight=False)
        number = "?" if job_index is None else str(job_index + 1)
        total = "?" if job_total is None else str(job_total)
        self.prefix = escape(f"job {number}/{total} [{label}]" if label else f"job {number}/{total}")
        self._status: Status | None = None
        self._last_phase: tuple[int, str] | None = None

    def __enter__(self) -> JobProgress:
        if self.console.is_terminal:
            self._status = self.console.status(self.prefix)
            self._status.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def stage(self, text: str) -> None:
        """A job stage (rendering, starting kgserve, ...): always printed as its own line."""
        self.console.print(f"{self.prefix}: {escape(text)}", soft_wrap=True)
        if self._status is not None:
            self._status.update(f"{self.prefix}: {escape(text)}")

    def update(self, update: ProgressUpdate) -> None:
        """The load generator's progress callback."""
        text = (
            f"{self.prefix}: level {update.level} ({update.level_index + 1}/{update.levels}) {update.phase}"
            f"{f' w{update.window}' if update.phase == 'measure' else ''}: "
            f"{update.req_per_s:.1f} req/s, {update.errors} errors"
        )
        if self._status is not None:
            self._status.update(text)
        key = (update.level_index, update.phase)
        if key != self._last_phase and update.phase in ("measure", "done"):
            if self._status is None or update.phase == "done":
                self.console.print(text, soft_wrap=True)
            self._last_phase = key
