"""Prometheus metrics of one kgserve app, in a registry of its own (no process-wide globals).

- kgserve_requests_total{outcome}          requests by outcome (ok, rejected, deadline, disconnect, ...)
- kgserve_request_latency_seconds          request latency histogram (all routes but /metrics)
- kgserve_inflight_queries                 queries admitted and not finished
- kgserve_engine_up{engine}                1 when that engine is ready
- kgserve_engine_restarts_total{engine}    restarts of that engine
- kgserve_engine_outstanding_visits{engine} visits queued or running on that engine
- kgserve_held_queries                     queries waiting in kgserve for an analysis thread, nothing of them written
- kgserve_held_turns                       analysed turns waiting in kgserve for a thread (thread reserve), all engines
- kgserve_websocket_connections_total{outcome} WebSocket connections by how they ended (closed, not_reading, ...)
- kgserve_websocket_open_connections        WebSocket connections open now
- kgserve_websocket_queries_total{outcome}  queries sent over WebSocket by outcome (ok, rejected, refused, ...)
- kgserve_websocket_connection_seconds      WebSocket connection lifetimes
- kgserve_websocket_paced_messages_total{bound}  WebSocket messages read late, past websocket.max_messages_per_s
                                           (bound="connection") or limits.max_messages_per_s_per_client ("client")
- kgserve_requests_paced_total               HTTP requests that waited, past limits.max_requests_per_s_per_client
- kgserve_forwarded_for_invalid_total       X-Forwarded-For headers of a trusted proxy that could not be read
- kgserve_refusals_total{reason}            connections, requests and WebSocket queries refused, by reason
                                           (server_connections, client_connections, server_inflight, client_inflight,
                                           memory, request_inflight, request_memory: kgserve.admission)

Engine figures are read from the pool's status() at scrape time. The two per-request series are plain counts
(`_RequestCounts`) turned into metric families at scrape time: prometheus_client's Counter.inc and
Histogram.observe (a lock and a value object per bucket) cost ~3 µs a request, these ~0.5 µs; the text a
scrape gets is the same (`_created` series included).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]

# what the app hands Metrics (read at scrape time): the pool's status(), admission's in-flight count and its refusals
StatusReader = Callable[[], Mapping[str, Any] | None]
InflightReader = Callable[[], int]
RefusalsReader = Callable[[], Mapping[str, int]]

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


@dataclass(frozen=True, eq=False)  # eq=False: the registry keys its collectors by identity
class _LiveCollector(Collector):
    """The figures read at scrape time, from what the app handed Metrics."""

    status: StatusReader
    inflight: InflightReader
    refusals: RefusalsReader | None = None

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("kgserve_inflight_queries", "Queries admitted and not finished", value=self.inflight())
        refused = CounterMetricFamily(
            "kgserve_refusals", "Connections, requests and WebSocket queries refused, by reason", labels=["reason"]
        )
        for reason, count in sorted((self.refusals() if self.refusals is not None else {}).items()):
            refused.add_metric([reason], float(count))
        yield refused
        up = GaugeMetricFamily("kgserve_engine_up", "1 when the engine is ready", labels=["engine"])
        restarts = CounterMetricFamily("kgserve_engine_restarts", "Engine restarts", labels=["engine"])
        visits = GaugeMetricFamily(
            "kgserve_engine_outstanding_visits", "Visits queued or running on the engine", labels=["engine"]
        )
        status = self.status() or {}
        held = status.get("held") or {}
        for engine in status.get("engines") or []:
            label = [str(engine.get("index", "?"))]
            up.add_metric(label, 1.0 if engine.get("state") == "ready" else 0.0)
            restarts.add_metric(label, float(engine.get("restarts") or 0))
            visits.add_metric(label, float(engine.get("outstanding_visits") or 0))
        yield up
        yield restarts
        yield visits
        yield GaugeMetricFamily(
            "kgserve_held_queries",
            "Queries waiting in kgserve for an analysis thread, nothing of them written yet",
            value=float(held.get("held_queries") or 0),
        )
        yield GaugeMetricFamily(
            "kgserve_held_turns",
            "Analysed turns waiting in kgserve for an analysis thread (thread reserve), all engines",
            value=float(held.get("held_turns") or 0),
        )


class _RequestCounts(Collector):
    """kgserve_requests_total{outcome} and kgserve_request_latency_seconds, as plain counts (module docstring)."""

    def __init__(self) -> None:
        self._created = time.time()
        self._outcomes: dict[str, list[float]] = {}  # outcome -> [count, created]
        self._buckets = [0] * (len(LATENCY_BUCKETS) + 1)  # per bucket, not cumulative; the last is +Inf
        self._sum = 0.0

    def observe(self, outcome: str, seconds: float | None) -> None:
        counted = self._outcomes.get(outcome)
        if counted is None:
            counted = self._outcomes[outcome] = [0.0, time.time()]
        counted[0] += 1
        if seconds is not None:
            self._buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1  # le: a value on a bound is in its bucket
            self._sum += seconds

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily("kgserve_requests", "HTTP requests by outcome", labels=["outcome"])
        for outcome, (count, created) in self._outcomes.items():
            requests.add_metric([outcome], count, created=created)
        yield requests
        cumulative, running = [], 0
        for bound, count in zip([*LATENCY_BUCKETS, float("inf")], self._buckets, strict=True):
            running += count
            cumulative.append((_bound_text(bound), float(running)))
        yield HistogramMetricFamily(
            "kgserve_request_latency_seconds",
            "HTTP request latency, from the request's arrival to its last byte",
            buckets=cumulative,
            sum_value=self._sum,
        )
        yield GaugeMetricFamily(
            "kgserve_request_latency_seconds_created",
            "HTTP request latency, from the request's arrival to its last byte",
            value=self._created,
        )


def _bound_text(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))  # prometheus_client's floatToGoString


class Metrics:
    def __init__(
        self,
        status: StatusReader,
        inflight: InflightReader,
        refusals: RefusalsReader | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._requests = _RequestCounts()
        self.registry.register(self._requests)
        self.ws_connections = Counter(
            "kgserve_websocket_connections", "WebSocket connections by outcome", ["outcome"], registry=self.registry
        )
        self.ws_open = Gauge("kgserve_websocket_open_connections", "WebSocket connections open", registry=self.registry)
        self.ws_queries = Counter(
            "kgserve_websocket_queries", "WebSocket queries by outcome", ["outcome"], registry=self.registry
        )
        self.ws_paced = Counter(  # kgserve.ws.pacing
            "kgserve_websocket_paced_messages",
            "WebSocket messages read late, past a bound on messages a second (connection or client)",
            ["bound"],
            registry=self.registry,
        )
        self.http_paced = Counter(  # kgserve.http.pacing
            "kgserve_requests_paced",
            "HTTP requests that waited their turn, past limits.max_requests_per_s_per_client",
            registry=self.registry,
        )
        self.ws_duration = Histogram(
            "kgserve_websocket_connection_seconds",
            "WebSocket connection lifetime, from the handshake to the close",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.forwarded_invalid = Counter(  # kgserve.forwarded: the peer's address was used instead
            "kgserve_forwarded_for_invalid",
            "X-Forwarded-For headers from a trusted proxy (server.trusted_proxies) that could not be read",
            registry=self.registry,
        )
        self.registry.register(_LiveCollector(status, inflight, refusals))
        self.observe = self._requests.observe  # one request's outcome and latency (None: not timed, /metrics)

    def websocket_opened(self) -> None:
        self.ws_open.inc()

    def websocket_closed(self, outcome: str, seconds: float) -> None:
        self.ws_open.dec()
        self.ws_connections.labels(outcome=outcome).inc()
        self.ws_duration.observe(seconds)

    def websocket_query(self, outcome: str) -> None:
        self.ws_queries.labels(outcome=outcome).inc()

    def websocket_paced(self, bound: str) -> None:
        self.ws_paced.labels(bound=bound).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
