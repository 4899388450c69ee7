"""The supervisor's give-up rule: the same failure before ready, REFUSAL_STARTS times in a row, is a refusal."""

from __future__ import annotations

from kgserve.engine.errors import EngineStartupError
from kgserve.engine.supervisor import REFUSAL_STARTS, Slot, Supervisor, refusal_signature
from kgserve.settings import EngineSettings


def _exit(line: str, code: int = 1) -> EngineStartupError:
    return EngineStartupError("exited", exit_code=code, stderr_tail=["2026-11-28 21:19:39+0000: Loading", line, ""])


def _supervisor(reasons: list[str]) -> Supervisor:
    settings = EngineSettings.model_validate({"backends": {"sim": {"command": ["x"]}}})
    return Supervisor(
        Slot(0),
        settings,
        make_engine=lambda index: None,  # type: ignore[arg-type,return-value]  # never called here
        on_ready=lambda engine: None,
        on_change=lambda: None,
        closing=lambda: False,
        on_refusal=reasons.append,
    )


def test_signature_ignores_timestamps_and_needs_an_exit() -> None:
    a = _exit("2026-11-28 21:19:40+0000: Error: no CUDA device")
    b = _exit("2026-11-28 22:00:01+0000: Error: no CUDA device")
    assert refusal_signature(a) == refusal_signature(b) == (1, "Error: no CUDA device")
    assert refusal_signature(EngineStartupError("not ready after 60s", exit_code=None)) is None
    assert refusal_signature(RuntimeError("unexpected")) is None


def test_the_same_failure_in_a_row_is_reported_once() -> None:
    reasons: list[str] = []
    supervisor = _supervisor(reasons)
    for _ in range(REFUSAL_STARTS - 1):
        supervisor._count_refusal(_exit("what(): Could not parse 'abc' as int"))
    assert reasons == []
    supervisor._count_refusal(_exit("what(): Could not parse 'abc' as int"))
    supervisor._count_refusal(_exit("what(): Could not parse 'abc' as int"))
    assert len(reasons) == 1 and "exit status 1: what(): Could not parse 'abc' as int" in reasons[0]


def test_a_different_failure_or_a_timeout_starts_the_count_again() -> None:
    reasons: list[str] = []
    supervisor = _supervisor(reasons)
    failures = [_exit("A"), _exit("A"), _exit("B"), _exit("B"), _exit("B", code=2), EngineStartupError("slow")]
    for failure in [*failures, _exit("A"), _exit("A")]:
        supervisor._count_refusal(failure)
    assert reasons == []


async def test_a_refusal_ends_kgserve_only_while_the_pool_is_not_ready() -> None:
    """One engine refusing while enough others serve leaves the pool degraded (its reason named), not ended."""
    from kgserve.engine.pool import EnginePool
    from kgserve.settings import load_settings

    class ServingPool(EnginePool):
        ready = True  # enough other engines ready

    settings = load_settings().with_overrides(backend="sim")
    for pool_type, ends in ((EnginePool, True), (ServingPool, False)):
        pool = pool_type(settings)
        pool._slots[0].refused = "engine 0 refused to start 3 times in a row the same way (exit status 1: no)"
        pool._refused(pool._slots[0].refused)
        assert pool.refused.is_set() == ends
        assert pool.refusal is not None and "engine 0 refused" in pool._reason()
