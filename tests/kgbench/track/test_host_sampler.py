"""kgbench.track.sampling.host: the host's CPU over a window, split between the job's own processes and the rest."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

from kgbench.track.sampling.host import HostSampler


def _spin_outside(seconds: float) -> int:
    """A spinning process that is not a descendant of this one (another job on the node): started by a short-lived
    launcher, so it is re-parented away from the test; its pid."""
    spin = f"import time\nt=time.time()\nwhile time.time()-t<{seconds}: pass"
    launcher = (
        "import subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-c', {spin!r}], start_new_session=True,\n"
        "                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"  # not our pipe: run returns
        "print(p.pid)"
    )
    out = subprocess.run([sys.executable, "-c", launcher], capture_output=True, text=True, check=True, timeout=30)
    return int(out.stdout.strip())


def test_a_busy_child_of_the_front_end_counts_as_an_engine_and_an_outsider_as_other() -> None:
    """A front end whose child spins (an engine) and an unrelated spinning process (another job on the node): the
    child's core goes to engine_cpu_cores, the outsider's to other_cpu_cores. Behaviour, not speed: each gets a
    share of a core that the sampler attributes to the right side."""
    engine = "import time\\nt = time.time()\\nwhile time.time() - t < 3: pass"
    frontend_code = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', '{engine}'])"
    frontend = subprocess.Popen([sys.executable, "-c", frontend_code])
    outsider = _spin_outside(3.0)
    try:
        with HostSampler(lambda: frontend.pid, interval_s=0.2) as host:
            time.sleep(0.5)
            start = time.monotonic()
            time.sleep(1.5)
            end = time.monotonic()
        figures = host.metrics(start, end)
    finally:
        frontend.kill()
        frontend.wait()
        with contextlib.suppress(ProcessLookupError):
            os.kill(outsider, signal.SIGKILL)
    # on two shared cores the spinners get what the scheduler gives them: shares, not amounts
    assert figures["engine_cpu_cores"] > max(0.05, 3 * figures["frontend_cpu_cores"])
    assert figures["other_cpu_cores"] > 0.05
    assert 0 < figures["host_cpu_busy_pct"] <= 100.5
