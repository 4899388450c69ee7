"""`--verify`'s verdict on the served req/s against the job's interval (kgbench.decide.verify.rate_verdict)."""

from __future__ import annotations

from kgbench.decide.verify import rate_verdict
from kgbench.load.interval import Interval


def test_a_job_whose_windows_agreed_exactly_is_not_failed_by_a_served_figure_a_hair_under_it() -> None:
    # the sim job's three windows agreed to the request: [131, 131]; served 130.6 +- 6 is that figure again
    below, words = rate_verdict(Interval(130.6, 124.6, 136.6, 5), Interval(131.0, 131.0, 131.0, 3))
    assert not below and words.startswith("within the noise: under the measured interval's low end 131")


def test_two_runs_whose_windows_each_agreed_differ_by_a_few_percent_without_failing() -> None:
    # CI's qualification on the real CPU KataGo: measured 69 req/s [69, 69], served 67 [67, 67] (97%)
    below, words = rate_verdict(Interval(67.0, 67.0, 67.0, 3), Interval(69.0, 69.0, 69.0, 3))
    assert not below and words.endswith("by less than two runs of one cfg differ (5%)")
    below, _ = rate_verdict(Interval(65.0, 65.0, 65.0, 3), Interval(69.0, 69.0, 69.0, 3))  # 94%: past it
    assert below


def test_a_served_figure_far_below_fails_whichever_interval_is_wider() -> None:
    # issue 33's eigen path: the shipped reserve served about half of what the job measured
    below, words = rate_verdict(Interval(1.70, 1.5, 1.9, 5), Interval(3.44, 2.34, 4.54, 5))
    assert below and words == "BELOW the measured interval"
    # a noisy served measurement still fails when its own noise cannot explain the gap
    below, words = rate_verdict(Interval(100.0, 90.0, 110.0, 5), Interval(131.0, 131.0, 131.0, 3))
    assert below and words == "BELOW the measured interval and its own noise (±10)"


def test_within_and_above() -> None:
    measured = Interval(32.9, 22.4, 43.4, 5)
    assert rate_verdict(Interval(32.7, 25.1, 40.3, 5), measured) == (False, "within it")
    assert rate_verdict(Interval(50.0, 45.0, 55.0, 5), measured) == (False, "above the measured interval")
