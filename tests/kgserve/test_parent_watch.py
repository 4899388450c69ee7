"""kgserve's watchdog on the process that started it (kgserve.procs.parent), as functions; the real kill of a
parent is in tests/kgbench/sweep/test_killed_sweep.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kgserve.procs.parent import ENV_PARENT_PID, parent_gone, take_parent_pid


def test_the_parent_pid_is_taken_out_of_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its workers and engines are not children of that process: they must not watch it."""
    monkeypatch.setenv(ENV_PARENT_PID, "1234")
    assert take_parent_pid(None) == 1234
    assert ENV_PARENT_PID not in os.environ
    monkeypatch.setenv(ENV_PARENT_PID, "4321")
    assert take_parent_pid(77) == 77 and ENV_PARENT_PID not in os.environ
    monkeypatch.setenv(ENV_PARENT_PID, "not-a-pid")
    assert take_parent_pid(None) is None


def test_a_parent_is_gone_once_it_has_exited() -> None:
    assert not parent_gone(os.getppid(), direct=True)
    assert not parent_gone(os.getpid(), direct=False)
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert parent_gone(int(done.stdout), direct=False)  # reaped: no such process (a reuse of the pid is unlikely)
    assert parent_gone(os.getpid(), direct=True)  # watched as the direct parent, but it is not ours: re-parented
