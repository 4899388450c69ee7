"""Smoke test of the soak through HAProxy: real HAProxy, real kgserve + sim engines, tiny numbers."""

from __future__ import annotations

import pytest

from benchmarks import soak_balanced
from kgbench.targets.haproxy_proc import BackendStat, haproxy_binary


def _stats(status: str, sessions: int) -> dict[str, BackendStat]:
    return {"kgserve0": BackendStat("kgserve0", status, sessions)}


def test_timeline_reads_out_back_and_requests_sent_while_out() -> None:
    tl = soak_balanced.Timeline(kills={"kgserve0": 10.0})
    for t, status, sessions in [(9, "UP", 5), (11, "UP 1/2", 7), (12, "DOWN", 8), (13, "DOWN", 8), (14, "DOWN 1/2", 9)]:
        tl.samples.append((float(t), _stats(status, sessions)))
    tl.samples.append((15.0, _stats("UP", 12)))
    assert tl.out("kgserve0") == 12.0 and tl.back("kgserve0") == 15.0
    assert tl.sent_while_down("kgserve0") == 1  # 8 -> 8 while DOWN, then 8 -> 9 into "DOWN 1/2" (a check passed)
    assert soak_balanced.Timeline().out("kgserve0") is None


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.skipif(haproxy_binary() is None, reason="haproxy is not installed (apt install haproxy)")
def test_soak_balanced_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    argv = "--backends 2 --requests 400 --concurrency 16 --engine-restart-s 1 --max-seconds 60"
    code = soak_balanced.main(argv.split())
    out = capsys.readouterr().out
    assert "| lost | 0 |" in out and "| cross-delivered | 0 |" in out and "| unaccounted | 0 |" in out
    assert "| requests sent | 400 |" in out
    assert "kgserve1 (SIGKILLed, engine too) out of the rotation after" in out and "logical CPUs" in out
    assert code == 0
