"""Talking to a running kgserve over HTTP: one POST /analysis, one /metrics value."""

from __future__ import annotations

import httpx

__all__ = ["ONE_CLIENT", "metric", "metric_value", "post"]


def post(url: str, content: bytes, **headers: str) -> httpx.Response:
    """POST `content` to `url`/analysis (headers as keyword arguments: `**{"X-Deadline-Ms": "300"}`)."""
    return httpx.post(url + "/analysis", content=content, headers=headers, timeout=60)


def metric_value(text: str, name: str) -> float:
    """The sum of a Prometheus series' samples in a /metrics `text` (all its label sets)."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def metric(url: str, name: str, **headers: str) -> float:
    """`metric_value` of `url`/metrics."""
    return metric_value(httpx.get(url + "/metrics", headers=headers, timeout=10).text, name)


# limits for a test that is a kgserve's only client and loads it hard: its per-client share is the whole server
ONE_CLIENT = {"max_inflight_per_client": 4096, "max_connections_per_client": 4096}
