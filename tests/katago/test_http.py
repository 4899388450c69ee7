"""POST /analysis with the real KataGo behind `python -m kgserve` (backend eigen): what tests/kgserve/http checks on the
simulated engine, where a real engine can answer it in seconds.

Where a sim test holds for any engine, it runs here as is, against this module's `server` fixture; the others
reuse the sim tests' helpers with sizes a CPU engine answers in seconds.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import REPO, analysis_query
from tests.helpers.analysis_checks import (
    ERRORS_IN,
    check_concurrent_requests,
    check_deadline_returns_what_katago_returns,
    check_each_error_line_posted_alone,
    check_lategame_sample_gives_three_turns,
    check_partial_lines,
    check_several_queries_in_one_body_keep_their_ids,
    line_shape,
)
from tests.helpers.http import ONE_CLIENT, metric, post
from tests.katago.conftest import TIER_CFG, RealKatago, start_kgserve, tier_config

pytestmark = pytest.mark.katago

SAMPLES = REPO / "assets" / "analysis"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, real_katago: RealKatago) -> Iterator[Any]:
    config = tier_config(
        tmp_path_factory.mktemp("kgserve-katago"),
        real_katago,
        limits={"max_inflight_queries": 4096, "max_visits": 10_000_000, **ONE_CLIENT},
    )
    process = start_kgserve(config)
    yield process
    process.stop()


def test_readyz_names_the_real_engine(server: Any, real_katago: RealKatago) -> None:
    readyz = httpx.get(server.url + "/readyz", timeout=10).json()
    assert readyz["ready"] is True and readyz["backend"] == "eigen" and readyz["simulated"] is False
    # both come from the engine itself, through the internal actions query_version and query_models
    assert readyz["katago_version"][0].isdigit() and "sim" not in readyz["katago_version"]
    # KataGo's query_models names the model as given on its command line (kgserve passes an absolute path)
    assert readyz["model"] == str(real_katago.model)
    engine = readyz["engines"][0]
    assert engine["state"] == "ready" and engine["restarts"] == 0
    assert any("Started, ready to begin handling requests" in line for line in engine["last_stderr"])


@pytest.mark.parametrize("index", range(len(ERRORS_IN)))
def test_each_error_line_posted_alone(server: Any, index: int) -> None:
    check_each_error_line_posted_alone(server, index)


def test_lategame_sample_gives_three_turns(server: Any) -> None:
    check_lategame_sample_gives_three_turns(server)


def test_several_queries_in_one_body_keep_their_ids(server: Any) -> None:
    check_several_queries_in_one_body_keep_their_ids(server)


def test_deadline_returns_what_katago_returns(server: Any) -> None:
    check_deadline_returns_what_katago_returns(server)


def _post_samples(url: str, visits: int) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Every sample input posted at once (with its maxVisits lowered to `visits`): stem -> (query, lines)."""
    queries = {path.stem: json.loads(path.read_text()) for path in sorted((SAMPLES / "inputs").glob("*.json"))}
    for query in queries.values():
        query["maxVisits"] = visits

    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=120) as client:
            return await asyncio.gather(
                *(client.post(url + "/analysis", content=json.dumps(query)) for query in queries.values())
            )

    answers: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    for (stem, query), response in zip(queries.items(), asyncio.run(run()), strict=True):
        assert response.status_code == 200, response.text
        answers[stem] = (query, [json.loads(line) for line in response.content.splitlines()])
    return answers


def test_five_samples_have_the_recorded_shape(server: Any) -> None:
    answers = _post_samples(server.url, visits=100)
    assert len(answers) == 5
    for stem, (query, got) in answers.items():
        recorded = [json.loads(line) for line in (SAMPLES / "outputs" / f"{stem}.jsonl").read_text().splitlines()]
        assert sorted(line["turnNumber"] for line in got) == sorted(line["turnNumber"] for line in recorded), stem
        assert sorted(map(line_shape, got), key=repr) == sorted(map(line_shape, recorded), key=repr), stem
        for line in got:
            assert line["rootInfo"]["visits"] == query["maxVisits"], stem
            if "allowMoves" in query:
                assert {info["move"] for info in line["moveInfos"]} <= set(query["allowMoves"][0]["moves"]), stem


def test_partial_reports_stream_before_the_final_line(server: Any) -> None:
    check_partial_lines(server.url, visits=300, every=0.2)


def test_colliding_ids_under_concurrency_each_get_their_own(server: Any) -> None:
    check_concurrent_requests(server.url, 60)


def test_client_disconnect_terminates_the_real_searches(server: Any) -> None:
    """More endless searches than the cfg has analysis threads, their clients gone: KataGo must stop them, else
    a short query would wait behind them for hours."""
    port = int(server.url.rsplit(":", 1)[1])
    count = int(str(TIER_CFG["numAnalysisThreads"])) + 2
    sockets = []
    for k in range(count):
        body = json.dumps(analysis_query(f"long{k}", max_visits=5_000_000)).encode()
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"POST /analysis HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        sockets.append(sock)
    try:
        end = time.monotonic() + 30
        while metric(server.url, "kgserve_inflight_queries") < count and time.monotonic() < end:
            time.sleep(0.05)
        assert metric(server.url, "kgserve_inflight_queries") == count
        # the setup has teeth: while they run, a short query waits in KataGo's queue until its deadline cuts it
        short = json.dumps(analysis_query("short", moves=[["B", "Q4"]], max_visits=20)).encode()
        blocked = post(server.url, short, **{"X-Deadline-Ms": "1500"})
        assert blocked.headers.get("x-deadline-exceeded") == "true", blocked.text
        assert json.loads(blocked.content).get("noResults") is True, blocked.text
    finally:
        for sock in sockets:
            sock.close()
    end = time.monotonic() + 30
    while metric(server.url, "kgserve_engine_outstanding_visits") > 0 and time.monotonic() < end:
        time.sleep(0.05)
    assert metric(server.url, "kgserve_engine_outstanding_visits") == 0, "KataGo still searches for dropped clients"
    assert metric(server.url, "kgserve_inflight_queries") == 0
    after = post(server.url, short)
    assert after.status_code == 200, after.text
    line = json.loads(after.content)
    assert line["id"] == "short" and line["rootInfo"]["visits"] == 20
    assert any("outcome=disconnect" in entry for entry in server.lines()), "\n".join(server.lines()[-20:])
