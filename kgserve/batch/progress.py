"""How far a run is, on stderr: a rich progress bar with rows/s and ETA on a terminal, a plain line every
`every_s` seconds when not (a log file, CI)."""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import TextIO

__all__ = ["Progress", "make_progress"]


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


class Progress:
    """The plain form: `batch: 1200/5000 rows (24%), 35.2 rows/s, ETA 1m48s, 3 errors`."""

    def __init__(self, total: int, done: int, *, every_s: float = 10.0, stream: TextIO = sys.stderr) -> None:
        self.total = total
        self.done = done
        self.errors = 0
        self.sent = 0  # rows answered in this run (the rate's numerator)
        self.retries: Counter[str] = Counter()  # failed attempts tried again, by reason (its text up to a colon)
        self.every_s = every_s
        self.stream = stream
        self.started = time.monotonic()
        self._last = self.started

    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.sent / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        rate = self.rate()
        left = self.total - self.done
        eta = _duration(left / rate) if rate > 0 else "?"
        share = 100 * self.done / self.total if self.total else 100.0
        return (f"batch: {self.done}/{self.total} rows ({share:.0f}%), {rate:.1f} rows/s, ETA {eta}, "
                f"{self.errors} errors")  # fmt: skip

    def advance(self, *, error: bool, sent: bool = True) -> None:
        self.done += 1
        self.sent += int(sent)
        self.errors += int(error)
        now = time.monotonic()
        if now - self._last >= self.every_s:
            self._last = now
            print(self.line(), file=self.stream, flush=True)

    def retried(self, reason: str) -> None:
        self.retries[reason.split(":", 1)[0]] += 1

    def close(self) -> None:
        print(self.line(), file=self.stream, flush=True)


class _RichProgress(Progress):
    def __init__(self, total: int, done: int) -> None:
        super().__init__(total, done)
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TaskProgressColumn, TextColumn, TimeRemainingColumn
        from rich.progress import Progress as RichBar

        self._bar = RichBar(
            TextColumn("batch"), BarColumn(), MofNCompleteColumn(), TaskProgressColumn(),
            TextColumn("{task.fields[rate]} rows/s, {task.fields[errors]} errors"), TextColumn("ETA"),
            TimeRemainingColumn(), console=Console(stderr=True),
        )  # fmt: skip
        self._task = self._bar.add_task("rows", total=total, completed=done, rate="0.0", errors=0)
        self._bar.start()

    def advance(self, *, error: bool, sent: bool = True) -> None:
        self.done += 1
        self.sent += int(sent)
        self.errors += int(error)
        self._bar.update(self._task, completed=self.done, rate=f"{self.rate():.1f}", errors=self.errors)

    def close(self) -> None:
        self._bar.stop()


def make_progress(total: int, done: int, *, every_s: float = 10.0) -> Progress:
    return _RichProgress(total, done) if sys.stderr.isatty() else Progress(total, done, every_s=every_s)
