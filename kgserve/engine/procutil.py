"""Process helpers for engine subprocesses: no orphans, group signals.

An engine child is started in its own session (process group = its pid) so that kgserve's terminal
signals (Ctrl-C) do not reach it directly (kgserve shuts it down in order), and with the Linux
parent-death signal set to SIGKILL so that it dies with kgserve even when kgserve itself is SIGKILLed.

Caveat (Linux semantics): the parent-death signal fires when the *thread* that started the child
exits. kgserve starts engines from its event-loop thread, which lives as long as the process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
from collections.abc import Callable

__all__ = ["child_preexec", "pid_alive", "signal_group"]

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        prctl: Callable[..., int] = libc.prctl
    except (OSError, AttributeError):
        return None
    return prctl


_PRCTL = _load_prctl()  # resolved once in the parent: nothing is loaded between fork and exec


def child_preexec(death_signal: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A `preexec_fn` that makes the child receive `death_signal` when its parent dies (None off Linux).

    The parent pid is captured before the fork: if the parent died between fork and prctl, the child
    has already been re-parented and exits at once instead of becoming an orphan.
    """
    prctl = _PRCTL
    if prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(death_signal), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


def signal_group(pid: int, sig: int) -> bool:
    """Send `sig` to the process group led by `pid` (falling back to the process). False if gone."""
    try:
        os.killpg(pid, sig)
        return True
    except ProcessLookupError:
        pass
    except PermissionError:
        pass
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def pid_alive(pid: int) -> bool:
    """True if a process with this pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    state = stat.rsplit(b")", 1)[-1].split()[0:1]
    return state != [b"Z"]
