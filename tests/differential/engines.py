"""Run request lines through an analysis engine process (the sim or a real KataGo) over stdin and stdout.

All lines are written at once by a writer thread while the main thread reads stdout, so neither pipe fills;
closing stdin makes the engine finish every query and exit (KataGo without -quit-without-waiting answers
everything first). Many queries are in flight at once, as many as the cfg's analysis threads can take.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO, SIM_MODEL

__all__ = ["CFG_TEXT", "EngineSpec", "katago_spec", "run_lines", "sim_spec"]

# small and fast: the queries ask for 1-4 visits; the default (no maxVisits in the query) is 2
CFG_TEXT = """\
logDir = {log_dir}
maxVisits = 2
numAnalysisThreads = 4
numSearchThreadsPerAnalysisThread = 1
nnMaxBatchSize = 8
nnCacheSizePowerOfTwo = 16
nnMutexPoolSizePowerOfTwo = 12
"""


@dataclass(frozen=True)
class EngineSpec:
    name: str
    argv: list[str]
    env: dict[str, str]


def write_cfg(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "differential.cfg"
    path.write_text(CFG_TEXT.format(log_dir=folder / "logs"))
    return path


def sim_spec(folder: Path) -> EngineSpec:
    env = dict(os.environ)
    # answer at once: the differential check is about what is answered, not when
    env.update(KGSERVE_SIM_FIXED_RPS="0", KGSERVE_SIM_STARTUP_S="0", KGSERVE_SIM_DEVICE=f"difftest-{os.getpid()}")
    env["TMPDIR"] = str(folder)  # the simulated device's files go there and are removed with the folder
    argv = [sys.executable, "-m", "kgserve.sim", "analysis", "-config", str(write_cfg(folder))]
    return EngineSpec("sim", [*argv, "-model", str(SIM_MODEL)], env)


def katago_spec(folder: Path, binary: str, model: str) -> EngineSpec:
    argv = [binary, "analysis", "-config", str(write_cfg(folder)), "-model", model]
    return EngineSpec("katago", argv, dict(os.environ))


def run_lines(spec: EngineSpec, lines: Sequence[str], timeout_s: float) -> list[str]:
    """Every stdout line the engine prints for `lines`; raises if it fails or runs past `timeout_s`."""
    proc = subprocess.Popen(
        spec.argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=spec.env,
        cwd=REPO,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    payload = "".join(line + "\n" for line in lines).encode("utf-8", errors="surrogateescape")
    stdin, stderr_chunks = proc.stdin, []

    def write() -> None:
        try:
            stdin.write(payload)
            stdin.close()
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=write, daemon=True)
    err_reader = threading.Thread(target=lambda: stderr_chunks.append(proc.stderr.read() if proc.stderr else b""))
    timer = threading.Timer(timeout_s, proc.kill)
    writer.start()
    err_reader.start()
    timer.start()
    try:
        out = proc.stdout.read()
        code = proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        writer.join(5)
        err_reader.join(5)
        proc.stdout.close()
        proc.stderr.close()
    if code != 0:
        log = b"".join(stderr_chunks).decode("utf-8", "replace").splitlines()
        # the request loop logs every error and warning line it answers: leave those out of the report
        tail = "\n".join([line for line in log if ": Error: {" not in line and ": Warning: {" not in line][-30:])
        last = "\n".join(out.decode("utf-8", "replace").splitlines()[-4:])  # KataGo's fatal errors go to stdout
        raise RuntimeError(f"{spec.name} exited with {code} (timeout {timeout_s}s?):\n{tail}\nstdout ends:\n{last}")
    return out.decode("utf-8", errors="replace").split("\n")[:-1]  # KataGo's lines end in "\n" only
