"""A sweep stopped by a signal ends as Ctrl-C ends it: SIGTERM is turned into KeyboardInterrupt, so one path (the
job's `finally` blocks: its load generator cancelled, its kgserve stopped; its run marked KILLED; the sweep's parent
run ended, kgbench.__main__) runs for both, and every record says which signal it was.

Without a handler SIGTERM ended the process at once: no `finally` ran, and its kgserve and engine were orphaned
(re-parented to init, still answering). SIGKILL runs nothing here; kgbench.targets.kgserve_process makes kgserve die
with its parent, and kgbench.track.reaper marks the dead sweep's runs when the next sweep, promote or report looks.

Only the first SIGTERM interrupts: a second one while the job is being stopped is noted, not raised, so the stop
(seconds: kgserve drains nothing, the load has ended) is not cut half-way. A second Ctrl-C still interrupts the stop
(Python's own SIGINT handler, or asyncio's while the load runs).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["EXIT_STATUS", "Interrupted", "interrupt_reason", "received", "stop_on_signals"]

# the shell's convention for "ended by signal N": 128 + N
EXIT_STATUS: dict[int, int] = {signal.SIGINT: 130, signal.SIGTERM: 143}


class Interrupted(KeyboardInterrupt):
    """SIGTERM, raised where the main thread is: a KeyboardInterrupt, so asyncio and Hydra let it through as they
    let Ctrl-C through (a plain exception would be caught by a task, or by `except Exception` in the job)."""


_received: list[int] = []


def received() -> int:
    """The signal that stopped this sweep (SIGINT when none was seen by this module: Ctrl-C reached Python's or
    asyncio's own handler)."""
    return _received[0] if _received else signal.SIGINT


def interrupt_reason() -> str:
    """How a run interrupted by this process's stop is marked (kgbench.failure_reason)."""
    sig = received()
    how = "Ctrl-C" if sig == signal.SIGINT else "kill"
    return f"interrupted by {signal.Signals(sig).name} ({how}): the sweep was stopped during this job"


def _on_sigterm(signum: int, _frame: FrameType | None) -> None:
    first = not _received
    _received.append(signum)
    if first:
        raise Interrupted(signal.Signals(signum).name)
    print("kgbench: SIGTERM again: already stopping", file=sys.stderr, flush=True)


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    signal.default_int_handler(signum, frame)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within: SIGTERM raises Interrupted in the main thread, SIGINT is recorded and raises KeyboardInterrupt as
    usual. Handlers can only be installed from the main thread; elsewhere (a test's thread) nothing changes."""
    _received.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, _on_sigterm)
    # left as Python's default only when nobody installed another (asyncio.run replaces the default one alone)
    if previous[signal.SIGINT] is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
