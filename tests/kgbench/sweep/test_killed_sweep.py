"""A real sim sweep (`python -m kgbench -m backend=sim ...`) killed mid-job with SIGTERM, Ctrl-C (SIGINT to its
process group, as a terminal sends it) and SIGKILL: it ends (a generous bound, not a speed assertion), no kgserve or
engine of it is left, and its runs are marked KILLED with the reason (after SIGKILL, by the next report)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from mlflow.tracking import MlflowClient

from kgbench.track.schema import FAILURE_REASON, FAULTS, OWNER_PID, ROLE, ROLE_JOB, ROLE_SWEEP, STATUS
from kgserve.logformat import LISTENING_RE
from tests.helpers.mlflow_store import seeded_uri
from tests.helpers.processes import wait_for

END_BOUND_S = 90.0  # generous: the sweep must end, on two busy cores; no figure is asserted
# a job that stays in its first level: windows that never agree (tolerance 0) until max_windows
ENDLESS_JOB = ["load=smoke", "load.concurrency=[2]", "load.tolerance=0.0", "load.max_windows=200"]


class Sweep:
    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.folder = tmp_path
        self.uri = seeded_uri(tmp_path / "mlflow.db")
        env = {
            **os.environ,
            "MLFLOW_TRACKING_URI": self.uri,
            "KGSERVE_SIM_DEVICE": f"kgbench-kill-{os.getpid()}-{tmp_path.name}",
            "PYTHONUNBUFFERED": "1",
        }
        dirs = [f"hydra.sweep.dir={tmp_path / 'multirun'}", f"hydra.run.dir={tmp_path / 'run'}"]
        self.log = (tmp_path / "sweep.log").open("wb")
        # its own process group, as a shell's job: Ctrl-C is SIGINT to the whole group
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kgbench", "-m", "backend=sim", *args, *dirs],
            cwd=tmp_path,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        self.log.flush()
        return (self.folder / "sweep.log").read_text(errors="replace")

    def kgserve(self) -> psutil.Process | None:
        try:
            children = psutil.Process(self.proc.pid).children()
        except psutil.NoSuchProcess:
            return None
        return next((c for c in children if "kgserve" in " ".join(c.cmdline())), None)

    def _loaded(self) -> bool:
        """kgserve is ready and the load generator has had a couple of seconds on it (its first level's windows
        agree never: tolerance 0, so the job is still measuring when the test kills it)."""
        logs = list((self.folder / "multirun").glob("*/kgserve_stderr.log"))
        urls = [
            m.group(1) + ":" + m.group(2) for log in logs if (m := LISTENING_RE.search(log.read_text(errors="replace")))
        ]
        if not urls:
            return False
        try:
            with urllib.request.urlopen(urls[0] + "/readyz", timeout=2) as response:
                ready = response.status == 200
        except OSError:
            return False
        if ready:
            time.sleep(3.0)  # warmup (0.5 s) and into the first windows
        return ready

    def wait_measuring(self) -> tuple[psutil.Process, list[psutil.Process]]:
        """kgserve and its engine, once the load generator is measuring."""
        wait_for(lambda: self._loaded() or self.proc.poll() is not None, 240, "the job's load on its kgserve")
        assert self.proc.poll() is None, self.output()[-3000:]
        server = self.kgserve()
        assert server is not None, self.output()[-3000:]
        engines = server.children(recursive=True)
        assert engines, "kgserve has no engine"
        return server, engines

    def ended(self) -> int:
        """The sweep's exit status, within END_BOUND_S (a hang fails the test)."""
        try:
            return self.proc.wait(timeout=END_BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the sweep did not end within {END_BOUND_S:g} s:\n{self.output()[-3000:]}")

    def runs(self) -> list:  # type: ignore[type-arg]
        client = MlflowClient(self.uri)
        ids = [e.experiment_id for e in client.search_experiments()]
        return client.search_runs(ids, max_results=100)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.log.close()


@pytest.fixture
def sweep_of(tmp_path: Path) -> Iterator[type[Sweep]]:
    started: list[Sweep] = []

    def start(*args: str) -> Sweep:
        sweep = Sweep(tmp_path, *args)
        started.append(sweep)
        return sweep

    yield start  # type: ignore[misc]
    for sweep in started:
        sweep.close()


def all_gone(procs: list[psutil.Process]) -> bool:
    return not [p for p in procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def assert_nothing_left(procs: list[psutil.Process]) -> None:
    """kgserve and its engines end (bounded wait: kgserve's watchdog polls, a graceful stop drains)."""
    try:
        wait_for(lambda: all_gone(procs), 60, "kgserve and its engine to end")
    finally:
        for proc in procs:  # never leave one running, whatever the test found
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()


def assert_marked_killed(runs: list, signal_name: str | None) -> None:  # type: ignore[type-arg]
    assert runs, "no run recorded"
    for run in runs:
        assert run.info.status == "KILLED", (run.info.status, run.data.tags.get(ROLE))
        assert run.data.tags.get(STATUS) == "killed"
        reason = run.data.tags.get(FAILURE_REASON, "")
        assert (signal_name or "was gone") in reason, reason
    assert any(run.data.tags.get(ROLE) == ROLE_SWEEP for run in runs), "the sweep's parent run is not there"


@pytest.mark.parametrize(("how", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["sigterm", "ctrl-c"])
def test_a_signalled_sweep_ends_stops_its_kgserve_and_marks_its_runs(
    sweep_of: type[Sweep], how: signal.Signals, status: int
) -> None:
    sweep = sweep_of(*ENDLESS_JOB)
    server, engines = sweep.wait_measuring()
    if how == signal.SIGINT:
        os.killpg(sweep.proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the sweep and kgserve (its group)
    else:
        sweep.proc.send_signal(signal.SIGTERM)  # `kill PID`: the sweep alone
    assert sweep.ended() == status, sweep.output()[-3000:]
    assert_nothing_left([server, *engines])
    assert_marked_killed(sweep.runs(), how.name)


def test_after_sigkill_nothing_outlives_the_sweep_and_the_next_report_marks_its_runs(
    sweep_of: type[Sweep], tmp_path: Path
) -> None:
    sweep = sweep_of(*ENDLESS_JOB)
    server, engines = sweep.wait_measuring()
    sweep.proc.send_signal(signal.SIGKILL)  # no handler runs
    sweep.ended()
    assert_nothing_left([server, *engines])
    runs = sweep.runs()
    assert {run.info.status for run in runs} == {"RUNNING"}  # nobody marked them: the process had no chance
    assert {run.data.tags.get(OWNER_PID) for run in runs} == {str(sweep.proc.pid)}
    report = subprocess.run(
        [sys.executable, "-m", "kgbench.report", "--out", str(tmp_path / "report"), "--no-log"],
        env={**os.environ, "MLFLOW_TRACKING_URI": sweep.uri},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "KILLED: its process" in report.stderr, report.stdout + report.stderr
    assert_marked_killed(sweep.runs(), None)


def test_kgserve_stops_when_its_parent_is_gone_without_a_death_signal(tmp_path: Path) -> None:
    """The watchdog alone (a parent that started kgserve from a worker thread gets no parent-death signal): a
    middle process starts kgserve naming itself in KGSERVE_PARENT_PID, and is SIGKILLed."""
    script = (
        "import os, subprocess, sys, time\n"
        "proc = subprocess.Popen([sys.executable, '-m', 'kgserve', '--backend', 'sim', '--port', '0'],"
        " env={**os.environ, 'KGSERVE_PARENT_PID': str(os.getpid())})\n"
        "print(proc.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    middle = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert middle.stdout is not None
        server = psutil.Process(int(middle.stdout.readline()))
        wait_for(lambda: bool(server.children()), 120, "kgserve's engine")
        engines = server.children(recursive=True)
        time.sleep(0.5)
        middle.kill()
        middle.wait(timeout=30)
        assert_nothing_left([server, *engines])
    finally:
        with contextlib.suppress(ProcessLookupError):
            middle.kill()
        middle.wait(timeout=30)
        if middle.stdout is not None:
            middle.stdout.close()


def test_a_job_whose_engine_is_killed_mid_level_is_flagged_and_never_promoted(sweep_of: type[Sweep]) -> None:
    """The sim engine SIGKILLed during the first level: kgserve restarts it and the second level may be clean, but
    the run says what happened (kgbench.faults, every level's errors) and promote passes it over, saying why."""
    sweep = sweep_of("load=smoke", "load.concurrency=[2,4]")
    _server, engines = sweep.wait_measuring()
    engines[0].kill()
    sweep.ended()
    (job,) = [run for run in sweep.runs() if run.data.tags.get(ROLE) == ROLE_JOB]
    assert "engine[0] ended" in job.data.tags.get(FAULTS, ""), job.data.tags
    assert "errors_all_levels" in job.data.metrics
    promote = subprocess.run(
        [sys.executable, "-m", "kgbench.promote", "--dry-run", "--explain", "--allow-simulated"],
        env={**os.environ, "MLFLOW_TRACKING_URI": sweep.uri},
        cwd=sweep.folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = promote.stdout + promote.stderr
    assert promote.returncode != 0, out
    assert "faulted while measured (engine[0] ended" in out, out
    assert "WINNER" not in out, out


def test_a_job_whose_kgserve_is_killed_fails_with_the_reason(sweep_of: type[Sweep]) -> None:
    """kgserve SIGKILLed mid-job (its engine dies with it: the parent-death signal): the job fails, saying so,
    instead of standing at the earlier windows' figure."""
    sweep = sweep_of("load=smoke", "load.concurrency=[2]")
    server, engines = sweep.wait_measuring()
    server.kill()
    sweep.ended()
    assert_nothing_left([server, *engines])
    (job,) = [run for run in sweep.runs() if run.data.tags.get(ROLE) == ROLE_JOB]
    assert job.info.status == "FAILED", job.data.tags
    reason = job.data.tags.get(FAILURE_REASON, "")
    assert "kgserve exited during the measurement (killed by signal 9)" in reason, reason
