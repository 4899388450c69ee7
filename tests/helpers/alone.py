"""Tests that need the machine to themselves, in a suite that runs its tests side by side.

The suite runs on pytest-xdist's workers (`-n` in pyproject.toml's addopts): most tests wait (on subprocesses, on
the simulated engine's search time, on sockets), so running a few at once on CI's two cores roughly halves the
suite's time. A few tests compute and measure instead: a sweep of the real CPU KataGo compared against what kgserve
then serves, a job judged on an idle host. Marked ``@pytest.mark.alone``, such a test runs with no other test of the
session beside it.

The rule is a readers-writer lock on two files shared by the session's workers, taken around each test's whole
protocol (setup, call, teardown): every test holds the *room* shared, an ``alone`` test holds it exclusive. A
*door* is taken on the way in, and an ``alone`` test keeps it while it waits for the room, so that tests arriving
after it wait at the door and it is not starved by a stream of short tests (flock by itself favours no one). Without
xdist (``-n 0``, ``-p no:xdist``, a single test run by hand) there is one test at a time and no lock is taken.

The two files live in the session's base temporary folder (xdist gives each worker a folder inside it), so pytest
removes them with its old sessions. A worker is known by its config (``workerinput``), not by xdist's environment
variables: a test's own pytest subprocess inherits those, and taking its parent session's lock would deadlock it
behind an ``alone`` test waiting for the parent test to end.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["MARK", "one_test", "pytest_runtest_protocol", "session_folder"]

MARK = "alone"


def session_folder(config: pytest.Config) -> Path | None:
    """The folder the session's workers share (its base temporary folder), or None outside an xdist worker."""
    if not hasattr(config, "workerinput") or not config.option.basetemp:
        return None
    return Path(config.option.basetemp).parent  # xdist's worker folder: <the session's basetemp>/popen-gwN


@contextlib.contextmanager
def one_test(directory: Path | None, alone: bool) -> Iterator[None]:
    """Hold the room in `directory` for one test: shared for an ordinary test, exclusive for an ``alone`` one; no
    lock without a folder (one test at a time)."""
    if directory is None:
        yield
        return
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "alone-door", "a+b") as door, open(directory / "alone-room", "a+b") as room:
        fcntl.flock(door, fcntl.LOCK_EX)
        try:
            fcntl.flock(room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(door, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(room, fcntl.LOCK_UN)
            if alone:
                fcntl.flock(door, fcntl.LOCK_UN)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Each test, setup to teardown, beside the session's other workers' tests, or alone. A conftest imports this
    hook (tests/conftest.py). The outermost wrapper: a test's timeout (pytest-timeout) starts once it has its room,
    not while it waits for it."""
    with one_test(session_folder(item.config), item.get_closest_marker(MARK) is not None):
        yield
