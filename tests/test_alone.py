"""The suite runs its tests side by side on xdist's workers, and a test marked `alone` with none beside it
(tests/helpers/alone.py): checked in a small session of its own, three workers, the marked test among short ones
that each write when they ran."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow

INNER_CONFTEST = """
from tests.helpers.alone import pytest_runtest_protocol  # noqa: F401

def pytest_configure(config):
    config.addinivalue_line("markers", "alone: no other test beside it")
"""

INNER_TESTS = """
import json, os, time
import pytest

def _ran(name):
    start = time.monotonic()
    time.sleep(0.2)
    with open(os.environ["ALONE_LOG"], "a") as log:
        log.write(json.dumps([name, os.environ["PYTEST_XDIST_WORKER"], start, time.monotonic()]) + "\\n")

@pytest.mark.parametrize("n", range(9))
def test_before(n):
    _ran(f"before{n}")

@pytest.mark.alone
@pytest.mark.parametrize("n", range(2))
def test_alone(n):
    _ran(f"alone{n}")

@pytest.mark.parametrize("n", range(9))
def test_after(n):
    _ran(f"after{n}")
"""


def test_an_alone_test_runs_with_no_other_beside_it_and_the_others_run_side_by_side(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(INNER_CONFTEST)
    (tmp_path / "test_inner.py").write_text(INNER_TESTS)
    log = tmp_path / "ran.jsonl"
    env = {**os.environ, "ALONE_LOG": str(log), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "3", "-p", "no:cacheprovider", "-p", "no:randomly", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    ran = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(ran) == 20 and len({worker for _, worker, _, _ in ran}) > 1, ran
    for name, _worker, start, end in ran:
        if name.startswith("alone"):
            beside = [other for other, _, s, e in ran if other != name and s < end and e > start]
            assert beside == [], f"{name} ran beside {beside}"
    # the ordinary ones did run side by side: the lock is shared among them, not one at a time
    ordinary = sorted((s, e) for name, _, s, e in ran if not name.startswith("alone"))
    assert any(later_start < end for (_, end), (later_start, _) in itertools.pairwise(ordinary))
