"""kgserve's per-request metrics are plain counts turned into metric families at scrape time: a scrape gets
the text prometheus_client's own Counter and Histogram would give for the same requests."""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from kgserve.metrics import LATENCY_BUCKETS, Metrics

REQUESTS = [("ok", 0.003), ("ok", 0.005), ("rejected", 0.0051), ("ok", 301.0), ("disconnect", 0.25), ("ok", None)]


def _reference() -> str:
    registry = CollectorRegistry(auto_describe=True)
    requests = Counter("kgserve_requests", "HTTP requests by outcome", ["outcome"], registry=registry)
    latency = Histogram(
        "kgserve_request_latency_seconds",
        "HTTP request latency, from the request's arrival to its last byte",
        buckets=LATENCY_BUCKETS,
        registry=registry,
    )
    for outcome, seconds in REQUESTS:
        requests.labels(outcome=outcome).inc()
        if seconds is not None:
            latency.observe(seconds)
    return generate_latest(registry).decode()


def _without_timestamps(text: str) -> str:
    return re.sub(r"(_created(\{[^}]*\})?) \S+", r"\1 T", text)


def test_the_scrape_text_is_prometheus_clients_own() -> None:
    metrics = Metrics(status=lambda: None, inflight=lambda: 0)
    for outcome, seconds in REQUESTS:
        metrics.observe(outcome, seconds)
    rendered = metrics.render().decode()
    ours = rendered[: rendered.index("# HELP kgserve_websocket")]  # the two per-request series come first
    assert _without_timestamps(ours) == _without_timestamps(_reference())
    assert 'kgserve_requests_total{outcome="ok"} 4.0' in ours
    assert 'kgserve_request_latency_seconds_bucket{le="0.005"} 2.0' in ours  # a value on a bound is in it
    assert 'kgserve_request_latency_seconds_bucket{le="+Inf"} 5.0' in ours
