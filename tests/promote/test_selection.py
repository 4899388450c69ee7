"""The promote rule as a pure function, and the config.yaml backend edit as a pure text function."""

from __future__ import annotations

import math

import pytest

from kgbench.decide.cfgwrite import set_engine_backend, unified_diff
from kgbench.decide.selection import Candidate, choose_winner, format_table


def c(run_id: str, req: float | None, p99: float | None = 500.0, **kw: object) -> Candidate:
    return Candidate(run_id=run_id, req_per_s=req, p99_ms=p99, errors=kw.pop("errors", 0.0), **kw)  # type: ignore[arg-type]


def test_highest_throughput_wins_ties_by_p99() -> None:
    sel = choose_winner([c("a", 10, 900), c("b", 12, 950), c("c", 12, 800), c("d", 11, 100)])
    assert sel.winner is not None and sel.winner.run_id == "c"
    assert [v.reason for v in sel.verdicts] == [None] * 4


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (c("x", 99, errors=1.0), "1 errors"),
        (c("x", 99, timeouts=2.0), "2 timeouts"),
        (c("x", 99, status="FAILED"), "status FAILED"),
        (c("x", 99, failed=True), "kgbench.status failed"),
        (c("x", 99, unstable=True), "unstable"),
        (c("x", 99, invalid=True, invalid_reason="load generator saturated"), "invalid (load generator saturated)"),
        (c("x", None), "no req_per_s"),
        (c("x", math.nan), "no req_per_s"),
        (Candidate(run_id="x", req_per_s=99), "no errors metric"),
        (c("x", 99, 1500), "p99 1500 ms > SLO 1000 ms"),
        (c("x", 99, None), "no p99_ms (SLO given)"),
        (c("x", 99, simulated=True), "simulated"),
    ],
)
def test_passed_over_with_reason(bad: Candidate, reason: str) -> None:
    sel = choose_winner([bad, c("ok", 5)], slo_p99_ms=1000)
    assert sel.winner is not None and sel.winner.run_id == "ok"
    assert sel.verdicts[0].reason == reason
    assert "WINNER" in format_table(sel) and reason in format_table(sel)


def test_simulated_allowed_and_blocked_hint() -> None:
    sims = [c("s1", 5, simulated=True), c("s2", 7, simulated=True)]
    blocked = choose_winner(sims)
    assert blocked.winner is None and blocked.only_simulated_blocked()
    allowed = choose_winner(sims, allow_simulated=True)
    assert allowed.winner is not None and allowed.winner.run_id == "s2"
    assert choose_winner([]).winner is None


CONFIG = """\
# top comment
server:
  port: 9100   # port
engine:
  # which backend
  backend: cuda    # promote rewrites this
  cfg: katago_serving.cfg
  backends:
    cuda:
      backend: not-this-one
      command: [bin/cuda/katago]
    trt:
      command: [bin/trt/katago]
limits:
  backend: nor-this
"""


def test_set_engine_backend_edits_one_value_only() -> None:
    new = set_engine_backend(CONFIG, "trt")
    assert new == CONFIG.replace("  backend: cuda    # promote", "  backend: trt    # promote")
    assert "+  backend: trt    # promote rewrites this" in unified_diff(CONFIG, new, "a", "b")
    assert set_engine_backend(new, "trt") == new
    assert unified_diff(new, new, "a", "b") == ""


def test_set_engine_backend_variants_and_errors() -> None:
    assert set_engine_backend("engine:\n    backend: 'cuda'\n", "sim") == "engine:\n    backend: sim\n"
    assert set_engine_backend("engine:\n  backend:\n  cfg: x\n", "sim") == "engine:\n  backend: sim\n  cfg: x\n"
    with pytest.raises(ValueError, match="no top-level `engine:`"):
        set_engine_backend("server:\n  backend: cuda\n", "trt")
    with pytest.raises(ValueError, match="no `backend:` key"):
        set_engine_backend("engine:\n  cfg: x\n  backends:\n    cuda:\n      backend: y\n", "trt")
    with pytest.raises(ValueError, match="invalid backend name"):
        set_engine_backend(CONFIG, "trt\n  evil: 1")
