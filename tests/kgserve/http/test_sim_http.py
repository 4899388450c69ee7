"""POST /analysis end to end: `python -m kgserve --backend sim` in a subprocess, real HTTP on 127.0.0.1.

The acceptance checks of the kgserve issue: the lategame sample, every line of protocol/errors.in.jsonl
posted alone, 1,000 concurrent requests with colliding ids; plus deadline, metrics and readiness.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import REFERENCE, analysis_query

ERRORS_IN = (REFERENCE / "protocol" / "errors.in.jsonl").read_bytes().splitlines()
ERRORS_OUT = (REFERENCE / "protocol" / "errors.out.jsonl").read_bytes().splitlines()
ACTION_REFUSAL = b'{"error":"kgserve accepts analysis queries only: the \'%s\' action is not available over HTTP",'
UNKNOWN_FIELD = 7  # the query KataGo answers with a warning, then its result (the last line of errors.out)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, config_writer: Any, kgserve_process: Any) -> Iterator[Any]:
    config = config_writer(
        tmp_path_factory.mktemp("kgserve"),
        limits={"max_inflight_queries": 4096, "max_visits": 1_000_000},
    )
    process = kgserve_process(config, {"KGSERVE_SIM_SPEED": "200"})
    process.wait_listening()
    process.wait_ready()
    yield process
    process.stop()


def post(url: str, content: bytes, **headers: str) -> httpx.Response:
    return httpx.post(url + "/analysis", content=content, headers=headers, timeout=60)


def test_lategame_sample_gives_three_turns(server: Any) -> None:
    sample = (REFERENCE / "samples" / "inputs" / "lategame_19x19.json").read_bytes()
    response = post(server.url, sample)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in response.content.splitlines()]
    assert [line["id"] for line in lines] == ["lategame_19x19"] * 3
    assert sorted(line["turnNumber"] for line in lines) == [200, 210, 220]
    assert all(line["isDuringSearch"] is False for line in lines)


@pytest.mark.parametrize("index", range(len(ERRORS_IN)))
def test_each_error_line_posted_alone(server: Any, index: int) -> None:
    response = post(server.url, ERRORS_IN[index])
    got = response.content.splitlines()
    request = ERRORS_IN[index]
    if b'"action":"query_models"' in request or b'"action":"clear_cache"' in request:
        # kgserve refuses the actions KataGo knows (documented): only analysis is exposed over HTTP
        action = json.loads(request)["action"].encode()
        assert response.status_code == 400
        assert len(got) == 1 and got[0].startswith(ACTION_REFUSAL % action)
        return
    if index == UNKNOWN_FIELD:
        assert response.status_code == 200
        assert got[0] == ERRORS_OUT[index]
        assert len(got) == 2 and json.loads(got[1])["isDuringSearch"] is False
        assert json.loads(got[1])["id"] == "unknown_field"
        return
    assert response.status_code == 400, response.text
    assert got == [ERRORS_OUT[index]]


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
    query = analysis_query("slow", max_visits=1_000_000)
    response = post(server.url, json.dumps(query).encode(), **{"X-Deadline-Ms": "300"})
    assert response.status_code == 200, response.text
    assert response.headers["x-deadline-exceeded"] == "true"
    (line,) = [json.loads(raw) for raw in response.content.splitlines()]
    assert line["id"] == "slow" and line["isDuringSearch"] is False
    assert response.elapsed.total_seconds() < 10


def _grid_moves(count: int) -> list[list[str]]:
    """Legal moves that never touch: every other point of a 19x19 board, alternating colours."""
    columns = "ABCDEFGHJKLMNOPQRST"
    points = [f"{columns[x]}{y + 1}" for y in range(0, 19, 2) for x in range(0, 19, 2)]
    return [["B" if i % 2 == 0 else "W", points[i]] for i in range(count)]


MOVES = _grid_moves(70)


def _concurrent_query(k: int) -> tuple[str, tuple[int, int], bytes]:
    caller_id = "shared" if k % 2 == 0 else f"kgq{k}"  # the other half looks like internal ids
    turns = (k % 25, 25 + k // 25)  # unique per request among the 1,000
    query = analysis_query(caller_id, moves=MOVES, max_visits=8, analyzeTurns=list(turns))
    return caller_id, turns, json.dumps(query).encode()


def check_concurrent_requests(url: str, count: int) -> None:
    """`count` requests at once, half of them under one shared id, the rest under ids that look like kgserve's
    internal ones; each must get exactly its own two turns back under its own id."""
    import aiohttp

    requests = [_concurrent_query(k) for k in range(count)]
    assert len({turns for _, turns, _ in requests}) == count

    async def run() -> list[tuple[int, bytes]]:
        connector = aiohttp.TCPConnector(limit=count)
        timeout = aiohttp.ClientTimeout(total=300)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

            async def one(body: bytes) -> tuple[int, bytes]:
                async with session.post(url + "/analysis", data=body) as response:
                    return response.status, await response.read()

            return await asyncio.gather(*(one(body) for _, _, body in requests))

    results = asyncio.run(run())
    for (caller_id, turns, _), (status, body) in zip(requests, results, strict=True):
        assert status == 200, body[:300]
        lines = [json.loads(line) for line in body.splitlines()]
        assert [line["id"] for line in lines] == [caller_id, caller_id], body[:300]
        assert sorted(line["turnNumber"] for line in lines) == sorted(turns)


@pytest.mark.slow
def test_thousand_concurrent_requests_each_get_their_own(server: Any) -> None:
    check_concurrent_requests(server.url, 1000)


def check_partial_lines(url: str, visits: int, every: float) -> None:
    """A search of `visits` with reportDuringSearchEvery=`every` streams partial lines before its one final line."""
    query = analysis_query("live", max_visits=visits, reportDuringSearchEvery=every)
    arrivals: list[tuple[float, dict[str, Any]]] = []
    with httpx.stream("POST", url + "/analysis", content=json.dumps(query).encode(), timeout=60) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line:
                arrivals.append((time.monotonic(), json.loads(line)))
    kinds = [line["isDuringSearch"] for _, line in arrivals]
    assert kinds[-1] is False and kinds.count(False) == 1 and kinds.count(True) >= 2, kinds
    assert all(line["id"] == "live" for _, line in arrivals)
    assert arrivals[-1][0] - arrivals[0][0] > 0.2, "partial lines arrived together with the final one"


def test_partial_lines_stream_as_they_are_produced(server: Any) -> None:
    # ~100 simulated seconds of one search with the serving cfg (the H100-calibrated model: ~60 visits/s for one
    # search of 2 threads): ~0.5 s of wall time at speed 200, ~200 partial lines
    check_partial_lines(server.url, 6_000, 0.5)


def test_several_queries_in_one_body_keep_their_ids(server: Any) -> None:
    body = b"\n".join(
        json.dumps(analysis_query(caller_id, moves=[["B", "Q16"]], max_visits=visits)).encode()
        for caller_id, visits in (("a", 400), ("b", 20), ("a", 30))
    )
    response = post(server.url, body)
    assert response.status_code == 200
    ids = [json.loads(line)["id"] for line in response.content.splitlines()]
    assert sorted(ids) == ["a", "a", "b"]
