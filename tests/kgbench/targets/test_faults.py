"""A job's target faults, read from two readiness documents (kgserve's /readyz, the pool's status)."""

from __future__ import annotations

from kgbench.targets.faults import Fault, faults_text, restart_faults, target_gone


def engine(index: int, restarts: int, pid: int | None, error: str | None = None) -> dict[str, object]:
    return {"index": index, "restarts": restarts, "pid": pid, "last_error": error}


def test_a_quiet_measurement_has_no_fault() -> None:
    status = {"engines": [engine(0, 0, 100), engine(1, 2, 200, "engine[1] exited")]}
    assert restart_faults(status, status) == []


def test_an_engine_restarted_or_still_in_its_back_off_is_a_fault_with_its_reason() -> None:
    before = {"engines": [engine(0, 0, 100), engine(1, 0, 200)]}
    after = {"engines": [engine(0, 1, 101, "engine[0] exited with status -9"), engine(1, 0, None, "engine[1] frozen")]}
    faults = restart_faults(before, after)
    assert [f.fatal for f in faults] == [False, False]
    assert "engine[0] ended 1 time(s)" in faults[0].what and "status -9" in faults[0].what
    assert "engine[1] ended 1 time(s)" in faults[1].what and "frozen" in faults[1].what


def test_kgserve_gone_is_fatal() -> None:
    fault = target_gone("kgserve", -9)
    assert fault.fatal and "killed by signal 9" in fault.what
    assert faults_text([fault, Fault("b")]) == f"{fault.what} | b"
