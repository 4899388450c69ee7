"""kgserve ends when the process that started it is gone: a watchdog on that process, for kgbench's jobs.

A kgbench job starts kgserve with the parent-death signal (kgbench.targets.kgserve_process) and names itself in
KGSERVE_PARENT_PID (or `--parent-pid`). The signal alone is not enough: Linux sends it when the *thread* that
started the child exits, which is not the process dying when a caller starts kgserve from a worker thread (kgbench
then leaves the signal off), and it does not exist off Linux. So kgserve also watches: every `POLL_S` it checks that
the parent still runs (and, when it was its direct parent, that it has not been re-parented to init or a
subreaper). Once the parent is gone, kgserve stops as on SIGTERM (drains, stops its engines: they have their own
parent-death signal, kgserve.engine.procutil), and if that takes longer than its grace period and `FORCE_AFTER_S`
more, it exits at once (its engines die with it).

The variable is taken out of kgserve's environment once read: its workers (kgserve.procs.workers) and engines are
not children of the named process, and watch nothing of it.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

from kgserve.engine.procutil import pid_alive

__all__ = ["ENV_PARENT_PID", "FORCE_AFTER_S", "POLL_S", "parent_gone", "take_parent_pid", "watch_parent"]

log = logging.getLogger("kgserve")

ENV_PARENT_PID = "KGSERVE_PARENT_PID"
POLL_S = 0.5
FORCE_AFTER_S = 10.0


def take_parent_pid(given: int | None) -> int | None:
    """The process to watch: `--parent-pid`, else KGSERVE_PARENT_PID (removed from the environment either way)."""
    value = os.environ.pop(ENV_PARENT_PID, None)
    if given is not None:
        return given
    try:
        return int(value) if value else None
    except ValueError:
        log.warning("%s=%r is not a pid: no parent watched", ENV_PARENT_PID, value)
        return None


def parent_gone(pid: int, direct: bool) -> bool:
    """Whether the watched process has ended (`direct`: it was this process's parent when the watch began)."""
    return (direct and os.getppid() != pid) or not pid_alive(pid)


def _watch(pid: int, grace_s: float, stop: threading.Event) -> None:
    direct = os.getppid() == pid
    while not stop.wait(POLL_S):
        if parent_gone(pid, direct):
            break
    else:
        return
    log.warning("the process that started kgserve (pid %d) is gone: stopping", pid)
    os.kill(os.getpid(), signal.SIGTERM)
    if not stop.wait(grace_s + FORCE_AFTER_S):
        log.error("still stopping %.0f s after the parent's end: exiting now", grace_s + FORCE_AFTER_S)
        os._exit(1)


def watch_parent(pid: int, grace_s: float) -> threading.Event:
    """Start the watchdog on `pid` (a daemon thread); set the returned event to end it."""
    stop = threading.Event()
    threading.Thread(target=_watch, args=(pid, grace_s, stop), name="kgserve-parent", daemon=True).start()
    return stop
