"""Stub PBS commands (symlinked as qsub, qstat and qdel) that run jobs on this machine, like a one-node PBS.

qsub SCRIPT    copies SCRIPT to $PBS_STUB_DIR/<id>.sh, starts `bash SCRIPT` in the background in its own
               session with the environment PBS gives a job (PATH, HOME, PBS_JOBID, PBS_O_WORKDIR; nothing else
               of the submitter's), output to $PBS_STUB_DIR/<id>.log, and prints `<id>.stub`; with
               $PBS_STUB_QSUB_ERROR set, prints it and fails instead.
qstat [ID...]  one `ID R|F` line per job (R: its process is alive).
qdel ID...     SIGTERM to the job's whole process tree, SIGKILL to what is left after $PBS_STUB_KILL_DELAY s
               (PBS's kill_delay): how PBS ends a deleted or preempted job.
Every call is appended to $PBS_STUB_DIR/calls.log.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

STATE = Path(os.environ["PBS_STUB_DIR"])


def _new_id() -> str:
    number = 1
    while True:
        try:
            os.close(os.open(STATE / f"{number}.id", os.O_CREAT | os.O_EXCL))
            return str(number)
        except FileExistsError:
            number += 1


def _pid(job_id: str) -> int | None:
    path = STATE / f"{job_id.split('.')[0]}.pid"
    return int(path.read_text()) if path.is_file() else None


def qsub(args: list[str]) -> int:
    if os.environ.get("PBS_STUB_QSUB_ERROR"):  # a site that refuses the job (bad resource, no such queue)
        print(f"qsub: {os.environ['PBS_STUB_QSUB_ERROR']}", file=sys.stderr)
        return 1
    script = args[-1]
    job_id = _new_id()
    shutil.copyfile(script, STATE / f"{job_id}.sh")  # kept for the test: dask-jobqueue deletes its file
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "PBS_JOBID": f"{job_id}.stub",
        "PBS_O_WORKDIR": os.getcwd(),
    }
    with open(STATE / f"{job_id}.log", "ab") as out:
        proc = subprocess.Popen(
            ["bash", script], stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env, start_new_session=True
        )
    (STATE / f"{job_id}.pid").write_text(str(proc.pid))
    print(f"{job_id}.stub")
    return 0


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def qstat(args: list[str]) -> int:
    ids = args or sorted((p.stem for p in STATE.glob("*.pid")), key=int)
    for job_id in ids:
        pid = _pid(job_id)
        print(f"{job_id} {'R' if pid is not None and _alive(pid) else 'F'}")
    return 0


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def qdel(args: list[str]) -> int:
    delay = float(os.environ.get("PBS_STUB_KILL_DELAY", "2"))
    for job_id in args:
        pid = _pid(job_id)
        procs = _tree(pid) if pid is not None else []  # collected first: children outlive their parents
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.send_signal(signal.SIGTERM)
        _gone, alive = psutil.wait_procs(procs, timeout=delay)
        for proc in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
    return 0


def main() -> int:
    name = Path(sys.argv[0]).name
    with open(STATE / "calls.log", "a", encoding="utf-8") as log:
        log.write(f"{time.time():.3f} {name} {' '.join(sys.argv[1:])}\n")
    return {"qsub": qsub, "qstat": qstat, "qdel": qdel}[name](sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
