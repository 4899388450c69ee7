"""kgserve.admission.rates: lines a second per connection and per client, a second's worth of burst, then a wait
that refills what was lent; the per-client table holds only buckets below full."""

from __future__ import annotations

import pytest

from kgserve.admission.rates import SWEEP_EVERY, Rate, Rates


def test_a_burst_of_the_rate_passes_then_each_line_waits_its_share() -> None:
    rate = Rate(100, now=0.0)
    assert all(rate.take(1, now=0.0) == 0.0 for _ in range(100))  # a second's worth at once
    assert rate.take(1, now=0.0) == pytest.approx(0.01)  # the 101st: lent, 1/100 s to refill
    assert rate.take(1, now=0.0) == pytest.approx(0.02)  # the debt grows while nothing refills it
    assert rate.take(1, now=0.03) == 0.0  # 3 refilled in 0.03 s: 2 repaid, this one taken


def test_a_message_of_many_lines_costs_them_all_and_waits_for_them() -> None:
    rate = Rate(100, now=0.0)
    assert rate.take(256, now=0.0) == pytest.approx(1.56)  # 156 past the burst: 1.56 s
    assert rate.take(1, now=1.56) == pytest.approx(0.01)  # paid back, nothing saved up


def test_the_rate_refills_to_its_burst_and_no_more() -> None:
    rate = Rate(10, now=0.0)
    rate.take(10, now=0.0)
    assert rate.full(now=1.0) and not rate.full(now=0.5)
    assert rate.take(10, now=100.0) == 0.0  # a long pause refills one second's worth, not 100
    assert rate.take(1, now=100.0) > 0


def test_zero_is_no_bound() -> None:
    assert Rate(0).take(1_000_000) == 0.0
    rates = Rates(0)
    assert rates.take("a", 1_000_000) == 0.0 and not rates.buckets


def test_each_client_has_its_own_bucket_across_its_connections() -> None:
    rates = Rates(10)
    assert rates.take("a", 10, now=0.0) == 0.0
    assert rates.take("a", 1, now=0.0) > 0  # a second connection of the same client shares the bucket
    assert rates.take("b", 10, now=0.0) == 0.0  # another client does not


def test_a_full_bucket_is_forgotten_and_a_client_cannot_start_afresh_before() -> None:
    rates = Rates(10)
    rates.take("flood", 30, now=0.0)  # 20 lent: full again only at t = 3
    for index in range(SWEEP_EVERY - 1):  # other clients, a line each, then quiet: the table is at its sweep
        rates.take(f"c{index}", 1, now=0.0)
    rates.take("one more", 1, now=1.5)  # the table is swept: the quiet ones are full again, the flood is not
    assert set(rates.buckets) == {"flood", "one more"}
    assert rates.take("flood", 1, now=1.5) == pytest.approx(0.6)  # its debt was kept (1.5 s repaid 15 of 20)
