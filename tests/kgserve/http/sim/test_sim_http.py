"""POST /analysis end to end: `python -m kgserve --backend sim` in a subprocess, real HTTP on 127.0.0.1.

The acceptance checks of the kgserve issue: the lategame sample, every line of protocol/errors.in.jsonl
posted alone, 1,000 concurrent requests with colliding ids; plus deadline, metrics and readiness.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.helpers.analysis_checks import (
    ERRORS_IN,
    UNKNOWN_FIELD,
    check_concurrent_requests,
    check_deadline_returns_what_katago_returns,
    check_each_error_line_posted_alone,
    check_lategame_sample_gives_three_turns,
    check_partial_lines,
    check_several_queries_in_one_body_keep_their_ids,
)
from tests.helpers.http import ONE_CLIENT, post


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, config_writer: Any, kgserve_process: Any) -> Iterator[Any]:
    config = config_writer(
        tmp_path_factory.mktemp("kgserve"),
        # one client (this test) sends a thousand requests at once: its share is the whole server
        limits={"max_inflight_queries": 4096, "max_visits": 1_000_000, **ONE_CLIENT},
    )
    process = kgserve_process(config, {"KGSERVE_SIM_SPEED": "200"})
    process.wait_listening()
    process.wait_ready()
    yield process
    process.stop()


def test_lategame_sample_gives_three_turns(server: Any) -> None:
    check_lategame_sample_gives_three_turns(server)


@pytest.mark.parametrize("index", range(len(ERRORS_IN)))
def test_each_error_line_posted_alone(server: Any, index: int) -> None:
    check_each_error_line_posted_alone(server, index)


def test_request_id_metrics_and_readyz(server: Any) -> None:
    response = post(server.url, ERRORS_IN[UNKNOWN_FIELD], **{"X-Request-ID": "req-42"})
    assert response.headers["x-request-id"] == "req-42"
    end = time.monotonic() + 10  # the line is logged after the last byte is sent: give the reader thread time
    while not any("request id=req-42 POST /analysis status=200" in line for line in server.lines()):
        assert time.monotonic() < end, "no access log line for request req-42"
        time.sleep(0.05)
    (logged,) = [line for line in server.lines() if "request id=req-42 " in line]  # once
    assert "outcome=ok" in logged and "latency_ms=" in logged and "queries=1" in logged
    readyz = httpx.get(server.url + "/readyz", timeout=10).json()
    assert readyz["ready"] is True and readyz["backend"] == "sim" and readyz["simulated"] is True
    assert "sim" in readyz["katago_version"]
    assert readyz["engines"][0]["state"] == "ready" and readyz["engines"][0]["pid"] > 0
    metrics = httpx.get(server.url + "/metrics", timeout=10).text
    for name in (
        'kgserve_requests_total{outcome="ok"}',
        "kgserve_request_latency_seconds_bucket",
        "kgserve_inflight_queries",
        'kgserve_engine_up{engine="0"} 1.0',
        'kgserve_engine_restarts_total{engine="0"}',
        'kgserve_engine_outstanding_visits{engine="0"}',
    ):
        assert name in metrics


def test_deadline_returns_what_katago_returns(server: Any) -> None:
    check_deadline_returns_what_katago_returns(server)


@pytest.mark.slow
def test_thousand_concurrent_requests_each_get_their_own(server: Any) -> None:
    check_concurrent_requests(server.url, 1000)


def test_partial_lines_stream_as_they_are_produced(server: Any) -> None:
    # ~100 simulated seconds of one search with the serving cfg (the default profile, the pinned transformer on an
    # H200: ~100 visits/s for one search of 2 threads): ~0.5 s of wall time at speed 200, ~200 partial lines
    check_partial_lines(server.url, 10_000, 0.5)


def test_several_queries_in_one_body_keep_their_ids(server: Any) -> None:
    check_several_queries_in_one_body_keep_their_ids(server)
