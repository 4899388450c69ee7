"""kgbench.track.contention and devprocs: which windows are contended and why, and who else holds a device."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kgbench.load.types import LevelSummary, LoadResult
from kgbench.track.contention import ContentionSettings, WindowFigures, judge, measure_windows
from kgbench.track.sampling.devprocs import foreign, sim_source
from kgserve.sim.devmem import device_holders
from tests.conftest import REFERENCE, REPO, SIM_MODEL, sim_env


def _level(concurrency: int, spans: tuple[tuple[float, float], ...]) -> LevelSummary:
    return LevelSummary(concurrency, None, 10, 1.0, 5.0, 50.0, 1, 1, 1, 1, 0.0, 0, 0, {}, 3, (5.0,), True,
                        measure_spans=spans)  # fmt: skip


def _result(*levels: LevelSummary) -> LoadResult:
    return LoadResult("http", "closed", list(levels), [], 0.0, False, False, None, started_at=100.0)


def test_short_windows_are_judged_in_spans_of_two_seconds_and_long_ones_alone() -> None:
    smoke = _result(_level(4, ((1.0, 3.0),)), _level(16, ((5.0, 8.0),)))  # 0.5 s windows: 4 and 6 of them
    # level 16: 4 windows make 2 s, the 2 left (1 s) join them
    assert measure_windows(smoke, 0.5) == [(4, 0, 4, 101.0, 103.0), (16, 0, 6, 105.0, 108.0)]
    default = _result(_level(8, ((0.0, 15.0), (20.0, 30.0))))  # 5 s windows, two repeats: judged one by one
    spans = measure_windows(default, 5.0)
    assert [(first, n) for _, first, n, _, _ in spans] == [(0, 1), (1, 1), (2, 1), (3, 1), (4, 1)]
    assert spans[3][3:] == (120.0, 125.0)


def test_a_remainder_as_long_as_a_span_is_judged_on_its_own() -> None:
    assert measure_windows(_result(_level(16, ((0.0, 4.0),))), 0.5) == [
        (16, 0, 4, 100.0, 102.0),
        (16, 4, 4, 102.0, 104.0),
    ]
    assert measure_windows(_result(_level(16, ((0.0, 3.0),))), 1.0) == [(16, 0, 3, 100.0, 103.0)]


def _window(other: float | None, busy: float | None, device: tuple[int, ...] | None = None) -> WindowFigures:
    return WindowFigures(8, 0, 1, 0.0, 5.0, other, 0.0 if other is not None else None, busy, 2.0, device)


def test_other_processes_flag_a_window_only_on_a_saturated_host() -> None:
    settings = ContentionSettings()
    assert settings.other_cores_limit(2) == 0.25 and settings.other_cores_limit(32) == pytest.approx(1.6)
    busy = judge([_window(0.05, 99.0), _window(0.93, 100.0)], settings)
    assert busy.flagged and len(busy.contended) == 1
    assert "1 of 2 window(s) contended" in busy.reason and "0.93 cores (>= 0.25)" in busy.reason
    assert "100% busy" in busy.reason
    assert busy.metrics()["contention_other_cpu_cores_max"] == pytest.approx(0.93)
    assert busy.metrics()["contended_windows"] == 1
    idle_cores = judge([_window(0.93, 60.0)], settings)  # the job had idle cores to take: not contended
    assert not idle_cores.flagged and idle_cores.reason == ""
    quiet = judge([_window(0.1, 100.0), _window(None, None)], settings)
    assert not quiet.flagged


def test_another_process_on_the_device_flags_the_window_and_is_named() -> None:
    verdict = judge([_window(0.0, 20.0, (4242, 0))], ContentionSettings())
    assert verdict.flagged
    assert "2 other process(es) on the job's device (pid 4242, 1 unnamed)" in verdict.reason
    assert not judge([_window(0.0, 20.0, (4242,))], ContentionSettings(device_processes=False)).flagged


def test_with_the_check_off_nothing_is_flagged_but_the_figures_stay() -> None:
    verdict = judge([_window(1.5, 100.0)], ContentionSettings(check=False))
    assert not verdict.flagged and not verdict.checked
    assert "1.50 cores" in verdict.reason


def test_settings_from_the_config_section() -> None:
    settings = ContentionSettings.from_mapping(
        {"check": "false", "other_cpu_cores": 0.5, "busy_pct": 80, "remeasure": 2, "settle_s": 0}
    )
    assert not settings.check and settings.other_cores_limit(64) == 0.5 and settings.remeasure == 2
    assert ContentionSettings.from_mapping({"check": "true"}).check and ContentionSettings.from_mapping({}).check
    with pytest.raises(ValueError, match="unknown contention setting"):
        ContentionSettings.from_mapping({"other_cores": 1})
    with pytest.raises(ValueError, match="remeasure"):
        ContentionSettings.from_mapping({"remeasure": -1})


def test_the_jobs_own_processes_are_not_others() -> None:
    me = os.getpid()
    assert foreign({me, 1}, {me}) == (1,)
    assert foreign({me}, {me}) == ()
    hidden = 2**22 + 17  # a pid of another PID namespace: no such process here
    assert foreign({hidden, hidden + 1}, {me, me + 1}) == (0,)  # two hidden, less the job's one other process


@contextlib.contextmanager
def _sim_on(device: str) -> Iterator[subprocess.Popen[bytes]]:
    """A simulated engine on `device`, started and ready (it holds its share of the device until stdin closes)."""
    cfg = Path(tempfile.mkdtemp()) / "analysis.cfg"
    cfg.write_text((REFERENCE / "analysis.cfg").read_text())
    argv = [sys.executable, "-m", "kgserve.sim", "analysis", "-config", str(cfg), "-model", str(SIM_MODEL)]
    env = sim_env(device=device, KGSERVE_SIM_STARTUP_S="0.01")
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env, cwd=REPO)  # fmt: skip
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if b"ready to begin handling requests" in line:
                break
        yield proc
    finally:
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.close()
        proc.stderr.read()
        proc.stderr.close()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_two_sims_on_one_simulated_device_see_each_other() -> None:
    device = f"contention-test-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    source = sim_source(device)
    assert source is not None and sim_source("private") is None
    try:
        with _sim_on(device) as first, _sim_on(device) as second:
            holders = set(device_holders(device))
            assert holders == {first.pid, second.pid} == source()
            # each one's job (the sim and its parent) sees the other as another job's process on its device
            assert foreign(holders, {first.pid}) == (second.pid,)
            assert foreign(holders, {second.pid}) == (first.pid,)
        deadline = time.monotonic() + 10
        while device_holders(device) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert device_holders(device) == {}  # gone once they exit
    finally:
        for path in Path(tempfile.gettempdir()).glob(f"kgserve-sim-device-{device}*"):
            path.unlink(missing_ok=True)
