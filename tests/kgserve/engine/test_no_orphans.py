"""No orphan engine: the engine dies with its parent even when the parent is SIGKILLed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kgserve.engine.procutil import pid_alive

from .conftest import REPO, fake_argv

PARENT = """
import asyncio, json, sys
from kgserve.engine.engine import Engine, EngineSpec

async def main():
    engine = Engine(EngineSpec(argv=json.loads(sys.argv[1]), startup_timeout_s=30))
    await engine.start()
    print(engine.pid, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def engine_children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_bytes().rsplit(b")", 1)[-1].split()
            except OSError:
                continue
            if int(fields[1]) == parent:
                found.append(int(entry.name))
    return found


def test_engine_dies_when_its_parent_is_sigkilled(model_file: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, json.dumps(fake_argv(model_file))],
        stdout=subprocess.PIPE,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "FAKE_IGNORE_EOF": "1"},  # only the death signal can stop it
    )
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()  # the parent prints the engine pid once it is ready
        engine_pid = int(line)
        assert pid_alive(engine_pid)
        assert engine_pid in engine_children(parent.pid)
        os.kill(parent.pid, signal.SIGKILL)  # no cleanup code of the parent runs
        parent.wait(10)
        deadline = time.monotonic() + 30  # polled: the kernel signals it at once, a loaded machine runs it later
        while pid_alive(engine_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not pid_alive(engine_pid), f"engine {engine_pid} outlived its SIGKILLed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)
        if parent.stdout is not None:
            parent.stdout.close()
