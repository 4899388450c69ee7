"""Terminal progress (rich): a sweep-wide bar with its ETA, and each job's own lines (job i of N, the current level,
live req/s and errors).

On a terminal the sweep's bar and the running job's status line stay at the bottom and update in place, the job's
stage lines printing above them; otherwise (CI, logs) one line per stage, per finished level and, after each job,
one line with the jobs done and the time left, so the output stays readable.
"""

from __future__ import annotations

import time
from types import TracebackType

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.spinner import Spinner
from rich.status import Status

from kgbench.load.types import ProgressUpdate

__all__ = ["JobProgress", "SweepBar", "grow_sweep", "job_done", "start_sweep", "stop_sweep"]


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


class SweepBar:
    """The sweep's jobs done out of `total`, with the time left at the pace so far."""

    def __init__(self, total: int | None, console: Console) -> None:
        self.console = console
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.progress = Progress(
            TextColumn("sweep"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("jobs, elapsed"),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
            console=console,
        )
        self.task = self.progress.add_task("sweep", total=total)
        self.status = Spinner("dots", text="")
        self.live: Live | None = None
        if console.is_terminal:
            self.live = Live(Group(self.progress, self.status), console=console, refresh_per_second=4)
            self.live.start()

    def set_status(self, text: str) -> None:
        self.status.update(text=text)

    def job_done(self) -> None:
        self.done += 1
        self.progress.advance(self.task)
        self.set_status("")
        if self.live is None:
            elapsed = time.monotonic() - self.started
            left = ""
            if self.total and self.done < self.total:
                left = f", about {_duration(elapsed / self.done * (self.total - self.done))} left"
            of = f" of {self.total}" if self.total else ""
            self.console.print(f"sweep: {self.done}{of} jobs done in {_duration(elapsed)}{left}", soft_wrap=True)

    def grow(self, total: int) -> None:
        """More jobs than the sweep opened with (a race's rounds): the bar and the time left count them."""
        if self.total is not None and total > self.total:
            self.total = total
            self.progress.update(self.task, total=total)

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


_bar: list[SweepBar] = []


def start_sweep(total: int | None, console: Console | None = None) -> SweepBar:
    stop_sweep()
    bar = SweepBar(total, console or Console(stderr=True, highlight=False))
    _bar.append(bar)
    return bar


def stop_sweep() -> None:
    while _bar:
        _bar.pop().stop()


def grow_sweep(total: int) -> None:
    """This process's sweep now runs `total` jobs in all (nothing without a sweep)."""
    if _bar:
        _bar[-1].grow(total)


def job_done() -> None:
    """One job of this process's sweep finished, well or not (nothing without a sweep)."""
    if _bar:
        _bar[-1].job_done()


class JobProgress:
    def __init__(
        self, job_index: int | None, job_total: int | None, label: str, console: Console | None = None
    ) -> None:
        bar = _bar[-1] if _bar else None
        self._sweep = bar if bar is not None and bar.live is not None else None  # the job's line under its bar
        self.console = console or (bar.console if bar is not None else Console(stderr=True, highlight=False))
        number = "?" if job_index is None else str(job_index + 1)
        total = "?" if job_total is None else str(job_total)
        self.prefix = escape(f"job {number}/{total} [{label}]" if label else f"job {number}/{total}")
        self._status: Status | None = None
        self._last_phase: tuple[int, str] | None = None

    @property
    def _live(self) -> bool:
        return self._status is not None or self._sweep is not None

    def __enter__(self) -> JobProgress:
        if self._sweep is not None:
            self._sweep.set_status(self.prefix)
        elif self.console.is_terminal:
            self._status = self.console.status(self.prefix)
            self._status.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _show(self, text: str) -> None:
        if self._sweep is not None:
            self._sweep.set_status(text)
        elif self._status is not None:
            self._status.update(text)

    def stage(self, text: str) -> None:
        """A job stage (rendering, starting kgserve, ...): always printed as its own line."""
        self.console.print(f"{self.prefix}: {escape(text)}", soft_wrap=True)
        self._show(f"{self.prefix}: {escape(text)}")

    def update(self, update: ProgressUpdate) -> None:
        """The load generator's progress callback."""
        text = (
            f"{self.prefix}: level {update.level} ({update.level_index + 1}/{update.levels}) {update.phase}"
            f"{f' w{update.window}' if update.phase == 'measure' else ''}: "
            f"{update.req_per_s:.1f} {update.unit}, {update.errors} errors"
        )
        self._show(text)
        key = (update.level_index, update.phase)
        if key != self._last_phase and update.phase in ("measure", "done"):
            if not self._live or update.phase == "done":
                self.console.print(text, soft_wrap=True)
            self._last_phase = key
