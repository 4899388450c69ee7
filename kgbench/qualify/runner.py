"""The qualification's clock and its steps: each step gets a deadline inside the budget, runs, and leaves a record
(status, seconds, a one-line summary, its figures); subprocesses log to steps/<name>.log and are stopped at the
deadline. Progress goes to stderr, one line per event, with the time left."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["Budget", "StepFailed", "StepRecord", "run_command", "run_step"]

Status = Literal["pending", "ok", "failed", "skipped", "cut"]


class StepFailed(RuntimeError):
    """A step that could not do its job; the message is the record's summary."""


@dataclass
class StepRecord:
    name: str
    title: str
    status: Status = "pending"
    seconds: float = 0.0
    summary: str = ""
    data: dict[str, Any] = field(default_factory=dict)


class Budget:
    """The qualification's time: `share(f)` is a deadline f of the whole budget from now, never past the end."""

    def __init__(self, total_s: float) -> None:
        self.total_s = total_s
        self.started = time.monotonic()
        self.widen = 1.0  # the steps asked for (--steps) share the time of those left out

    @property
    def left(self) -> float:
        return self.total_s - (time.monotonic() - self.started)

    def share(self, fraction: float, floor_s: float = 20.0) -> float:
        """Seconds a step may take: `fraction` of the budget, at least `floor_s`, never more than what is left."""
        return max(0.0, min(self.left, max(floor_s, min(1.0, fraction * self.widen) * self.total_s)))

    def note(self, text: str) -> None:
        elapsed = time.monotonic() - self.started
        print(f"[qualify {elapsed:5.0f} s, {max(0.0, self.left):4.0f} s left] {text}", file=sys.stderr, flush=True)


def run_step(
    records: list[StepRecord],
    budget: Budget,
    name: str,
    title: str,
    action: Callable[[StepRecord], str],
    *,
    needs_s: float = 0.0,
) -> StepRecord:
    """Runs `action(record)` (which returns the summary and fills record.data), unless less than `needs_s` is left;
    an exception becomes a failed record, never the end of the qualification."""
    record = StepRecord(name, title)
    records.append(record)
    index = len(records)
    if budget.left < needs_s:
        record.status = "skipped"
        record.summary = f"skipped: {budget.left:.0f} s of the budget left, the step needs ~{needs_s:.0f} s"
        budget.note(f"step {index} {name}: {record.summary}")
        return record
    budget.note(f"step {index} {name}: {title}")
    started = time.monotonic()
    try:
        record.summary = action(record)
        record.status = "ok" if record.status == "pending" else record.status  # an action may say "skipped"
    except StepFailed as exc:
        record.status, record.summary = "failed", str(exc)
    except subprocess.TimeoutExpired as exc:
        record.status, record.summary = "cut", f"cut at the step's deadline ({exc.timeout:.0f} s of the budget)"
    except Exception as exc:  # a bug or an unforeseen failure: recorded, the other steps still run
        record.status, record.summary = "failed", f"{type(exc).__name__}: {exc}"
    record.seconds = time.monotonic() - started
    budget.note(f"step {index} {name}: {record.status} in {record.seconds:.0f} s: {record.summary}")
    return record


def run_command(
    argv: Sequence[str], log: Path, timeout_s: float, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`argv` with its output in `log` (and the log's text returned); killed with its process group at the
    deadline (TimeoutExpired), so no engine it started outlives it."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as out:
        out.write("$ " + " ".join(argv) + "\n")
        out.flush()
        proc = subprocess.Popen(
            list(argv),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=max(1.0, timeout_s))
        except subprocess.TimeoutExpired:
            _stop_group(proc)
            raise
    return subprocess.CompletedProcess(list(argv), proc.returncode, log.read_text(encoding="utf-8", errors="replace"))


def _stop_group(proc: subprocess.Popen[Any]) -> None:
    # SIGINT first: kgbench and kgserve record what they have and stop their engines; then SIGKILL what is left
    try:
        os.killpg(proc.pid, signal.SIGINT)
    except ProcessLookupError:
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=20.0)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10.0)
