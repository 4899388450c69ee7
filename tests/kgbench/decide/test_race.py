"""The race of the contenders (kgbench.decide.race), pure: who races, in what order, when it stops, and how the
replicates become the contenders' intervals."""

from __future__ import annotations

import pytest

from kgbench.decide.race import RaceSettings, contenders, fold_replicates, run_race, still_tied
from kgbench.decide.selection import Candidate, choose_winner


def _measure(values: dict[str, list[float]], log: list[tuple[int, str]]):  # type: ignore[no-untyped-def]
    """A fake round: each contender's next value from its list (None once it runs out), the order logged."""

    def measure_round(order: list[str], round_no: int) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for run in order:
            log.append((round_no, run))
            left = values[run]
            out[run] = left.pop(0) if left else None
        return out

    return measure_round


def test_the_order_is_interleaved_and_separated_contenders_drop_out() -> None:
    log: list[tuple[int, str]] = []
    values = {"a": [20.0, 20.2, 19.9, 20.1], "b": [15.0, 15.1, 14.9, 15.0], "c": [19.0, 21.0, 20.5, 19.5]}
    outcome = run_race(["a", "b", "c"], _measure(values, log), RaceSettings(max_rounds=4))
    # A, B, C, A, B, C: after round 2 b's interval is clear of a's and it drops out; a and c go on
    assert log[:6] == [(1, "a"), (1, "b"), (1, "c"), (2, "a"), (2, "b"), (2, "c")]
    assert log[6:] == [(3, "a"), (3, "c"), (4, "a"), (4, "c")]
    assert outcome.separated == {"b": 2}
    assert outcome.tied == ("a", "c") and outcome.rounds == 4
    assert outcome.stop == "budget spent (4 rounds)"
    assert "indistinguishable: a, c" in outcome.summary() and "b separated after round 2" in outcome.summary()


def test_the_race_stops_once_one_contender_is_left() -> None:
    log: list[tuple[int, str]] = []
    values = {"a": [20.0, 20.1, 20.0], "b": [18.0, 18.1, 18.0]}
    outcome = run_race(["a", "b"], _measure(values, log), RaceSettings(max_rounds=6))
    assert [run for _, run in log] == ["a", "b", "a", "b"]  # no decision after one replicate: an interval needs two
    assert outcome.tied == ("a",) and outcome.stop == "separated after round 2"


def test_a_failed_replicate_counts_for_nothing_and_keeps_its_contender_in() -> None:
    values = {"a": [20.0, 20.0, 20.0], "b": []}  # b's replicates all fail: never judged, never dropped
    outcome = run_race(["a", "b"], _measure(values, []), RaceSettings(max_rounds=3))
    assert outcome.tied == ("a", "b") and outcome.values["b"] == []
    assert still_tied({"a": [1.0, 1.1], "b": [5.0]}) == ["a", "b"]


def test_contenders_are_the_runs_tied_with_the_leader_capped() -> None:
    def cand(run: str, req: float, low: float, high: float) -> Candidate:
        return Candidate(run, req_per_s=req, req_per_s_low=low, req_per_s_high=high, errors=0, p99_ms=100)

    sel = choose_winner([cand("a", 20, 19, 21), cand("b", 19.5, 18, 21), cand("c", 19, 18.5, 19.5),
                         cand("d", 10, 9, 11)])  # fmt: skip
    assert contenders(sel) == ["a", "b", "c"]
    assert contenders(sel, max_contenders=2) == ["a", "b"]
    assert contenders(choose_winner([cand("a", 20, 19, 21), cand("d", 10, 9, 11)])) == []


def test_settings_auto_is_on_for_real_engines_and_off_for_the_sim_and_smoke() -> None:
    auto = RaceSettings.from_mapping({"enabled": "auto"})
    assert auto.on(simulated=False, smoke=False)
    assert not auto.on(simulated=True, smoke=False) and not auto.on(simulated=False, smoke=True)
    assert RaceSettings.from_mapping({"enabled": True}).on(simulated=True, smoke=True)
    assert not RaceSettings.from_mapping({"enabled": "false"}).on(simulated=False, smoke=False)
    with pytest.raises(ValueError, match="max_rounds"):
        RaceSettings.from_mapping({"max_rounds": 1})
    with pytest.raises(ValueError, match="unknown race"):
        RaceSettings.from_mapping({"rounds": 3})


def test_replicates_fold_into_the_run_they_remeasured_and_decide_the_verdict() -> None:
    def run(run_id: str, req: float, p99: float, of: str = "", **kw: object) -> Candidate:
        return Candidate(run_id, req_per_s=req, p99_ms=p99, errors=0, replicate_of=of, **kw)  # type: ignore[arg-type]

    cands = [
        run("a", 25.0, 900, req_per_s_low=20, req_per_s_high=30),
        run("b", 21.0, 300, req_per_s_low=17, req_per_s_high=25),
        run("a1", 20.0, 800, "a"), run("a2", 20.4, 820, "a"), run("a3", 20.2, 810, "a"),
        run("b1", 20.1, 310, "b"), run("b2", 19.9, 290, "b"), run("b3", 20.3, 300, "b"),
        run("b4", 99.0, 300, "b", contended=True),  # counts for nothing
    ]  # fmt: skip
    folded = {c.run_id: c for c in fold_replicates(cands)}
    assert set(folded) == {"a", "b"}
    assert folded["a"].replicates == 3 and folded["a"].req_per_s == pytest.approx(20.2)
    assert folded["b"].replicates == 3 and folded["b"].p99_ms == pytest.approx(300)
    sel = choose_winner(list(folded.values()))
    assert sel.winner is not None and sel.winner.run_id == "b"  # indistinguishable; lower p99
    assert sel.decision is not None
    assert sel.decision.reason.startswith(
        "indistinguishable from a (still within each other's 95% interval after a race"
    )
    assert "among the 2 the leader's p99 is over 25% above a tied run's" in sel.decision.reason
