"""A real `mlflow server` (sqlite backend) on loopback, stub PBS commands that run jobs on this machine, and one real
two-job sim sweep for the tests that only read what it recorded."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from tests.conftest import REPO
from tests.helpers.kgbench_runs import run_kgbench
from tests.helpers.mlflow_store import seeded_uri

STUB = Path(__file__).with_name("pbs_stub.py")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process and its descendants, SIGKILL what is left after 5 s."""
    try:
        procs = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        procs = []
    for item in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            item.terminate()
    _gone, alive = psutil.wait_procs(procs, timeout=5)
    for item in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            item.kill()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)


@pytest.fixture
def mlflow_server(tmp_path: Path) -> Iterator[str]:
    """`mlflow server` with a sqlite database and served artifacts; yields its http:// URI."""
    port = free_port()
    log = open(tmp_path / "mlflow-server.log", "wb")  # noqa: SIM115 (closed in finally)
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "mlflow", "server"),
            *("--backend-store-uri", seeded_uri(tmp_path / "mlflow-server.db")),
            *("--artifacts-destination", str(tmp_path / "mlflow-artifacts")),
            *("--host", "127.0.0.1", "--port", str(port), "--workers", "1"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240  # importing mlflow's server takes over a minute on a loaded machine
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"mlflow server did not start:\n{(tmp_path / 'mlflow-server.log').read_text()[-3000:]}")
            time.sleep(0.3)
        yield uri
    finally:
        stop_tree(proc)
        log.close()


@dataclass
class PBSStub:
    dir: Path
    env: dict[str, str]

    def job_ids(self) -> list[str]:
        return sorted((p.stem for p in self.dir.glob("*.pid")), key=int)

    def calls(self) -> list[str]:
        path = self.dir / "calls.log"
        return path.read_text().splitlines() if path.exists() else []

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=60, check=False)

    def alive_jobs(self) -> list[str]:
        lines = self.run("qstat").stdout.splitlines()
        return [line.split()[0] for line in lines if line.split()[1:] == ["R"]]


@pytest.fixture
def pbs_stub(tmp_path: Path) -> Iterator[PBSStub]:
    """qsub/qstat/qdel on PATH; every job still running at the end is deleted (its whole process tree)."""
    bin_dir = tmp_path / "pbsbin"
    state = tmp_path / "pbs"
    bin_dir.mkdir()
    state.mkdir()
    stub = bin_dir / "pbs_stub.py"
    stub.write_text(f"#!{sys.executable}\n" + STUB.read_text())
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    for name in ("qsub", "qstat", "qdel"):
        (bin_dir / name).symlink_to(stub)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PBS_", "KGBENCH_", "MLFLOW_"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PBS_STUB_DIR=str(state), PBS_STUB_KILL_DELAY="2")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    stubs = PBSStub(state, env)
    try:
        yield stubs
    finally:
        if stubs.job_ids():
            stubs.run("qdel", *stubs.job_ids())


@dataclass(frozen=True)
class SimSweep:
    folder: Path  # as run_kgbench's tmp_path: mlflow.db, multirun/ (a job's folder each, the ledger)
    code: int
    out: str


@pytest.fixture(scope="session")
def two_job_sim_sweep(tmp_path_factory: pytest.TempPathFactory) -> SimSweep:
    """`python -m kgbench -m backend=sim nnMaxBatchSize=8,32 load=smoke` (two levels a job), run once: a sweep takes
    half a minute on two busy cores, and the tests that take it only read its store, its output and its folders.
    Its windows settle within 50% (the smoke load's 25%): its tests promote its runs, and beside three other tests
    on two cores a level's windows could stay 25% apart, flagging the job unstable, which promote rightly refuses."""
    folder = tmp_path_factory.mktemp("two-job-sim-sweep")
    code, out = run_kgbench(
        folder, "-m", "backend=sim", "nnMaxBatchSize=8,32", "load=smoke", "load.tolerance=0.5",
        env={"KGSERVE_SIM_SPEED": "20"},
    )  # fmt: skip
    return SimSweep(folder, code, out)
