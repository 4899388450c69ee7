"""How much the batch command sends a kgserve at once, from its /readyz (kgserve.batch.target_http.plan_from_readyz)."""

from __future__ import annotations

from kgserve.batch.target_http import DEFAULT_CONCURRENCY, plan_from_readyz

SHIPPED = {"max_inflight_queries": 2048, "max_inflight_per_client": 512, "max_connections_per_client": 64,
           "max_queries_per_request": 256}  # fmt: skip


def test_two_queries_per_analysis_thread_over_half_the_connections_a_client_may_open() -> None:
    plan = plan_from_readyz({"analysis_threads": 128, "engines": [{}, {}], "client_limits": SHIPPED})
    assert (plan.concurrency, plan.group, plan.senders) == (512, 16, 32)
    assert "2 x 128 analysis threads x 2 engine(s)" in plan.why


def test_kgserves_limits_on_queries_in_flight_bound_it() -> None:
    limits = {**SHIPPED, "max_inflight_per_client": 100}
    plan = plan_from_readyz({"analysis_threads": 128, "engines": [{}], "client_limits": limits})
    assert plan.concurrency == 100 and plan.group == 4 and "limit on queries in flight" in plan.why
    assert plan_from_readyz({"analysis_threads": 4, "engines": [{}], "client_limits": SHIPPED}).group == 1


def test_given_or_unknown() -> None:
    assert plan_from_readyz({"client_limits": SHIPPED}, 96).concurrency == 96
    plan = plan_from_readyz({})
    assert plan.concurrency == DEFAULT_CONCURRENCY and plan.group == 1 and "default" in plan.why
    assert plan_from_readyz({"client_limits": {**SHIPPED, "max_queries_per_request": 2}}, 400).group == 2
