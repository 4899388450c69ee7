"""The WebSocket endpoint end to end: `python -m kgserve --backend sim` in a subprocess, a real WebSocket client.

The simulated engine runs in real time here (KGSERVE_SIM_SPEED=1), so a pondering query (maxVisits
clamped to the cap) keeps running until it is terminated.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosedError, InvalidStatus

from tests.conftest import REPO
from tests.helpers.http import metric_value

REFERENCE = REPO / "tests" / "data" / "katago-reference"
TOKEN = "ws-test-token-9d1c"
PER_CONNECTION = 4
RECV_S = 30.0
UNTIL_S = 60.0
POLL_S = 0.1
HEADER_TIMEOUT_S = 1.0
pytestmark = pytest.mark.slow

QUERY = {
    "moves": [["B", "Q4"], ["W", "D4"], ["B", "Q16"]],
    "rules": "chinese",
    "komi": 7.5,
    "boardXSize": 19,
    "boardYSize": 19,
}


def query(caller_id: str, visits: int = 50, **extra: Any) -> dict[str, Any]:
    return {"id": caller_id, **QUERY, "maxVisits": visits, **extra}


def ponder(caller_id: str, **extra: Any) -> dict[str, Any]:
    return query(caller_id, 10_000_000, reportDuringSearchEvery=0.1, **extra)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, config_writer: Any, kgserve_process: Any) -> Iterator[Any]:
    config = config_writer(
        tmp_path_factory.mktemp("kgserve"),
        # a short header timeout: the HTTP connection limits must not reach a connection once it is a WebSocket
        server={"auth_token_env": "KGSERVE_WS_TEST_TOKEN", "header_timeout_s": HEADER_TIMEOUT_S},
        limits={"max_visits": 100_000},
        websocket={"max_inflight_per_connection": PER_CONNECTION, "send_buffer_bytes": 65536},
    )
    process = kgserve_process(config, {"KGSERVE_SIM_SPEED": "1", "KGSERVE_WS_TEST_TOKEN": TOKEN})
    process.wait_listening()
    process.wait_ready()
    yield process
    process.stop()


def ws_url(server: Any, **params: str) -> str:
    query_string = "&".join(f"{key}={value}" for key, value in {"token": TOKEN, **params}.items())
    return server.url.replace("http://", "ws://") + "/ws?" + query_string


@asynccontextmanager
async def session(server: Any, **params: str) -> AsyncIterator[ClientConnection]:
    async with connect(ws_url(server, **params), max_size=None, open_timeout=30) as ws:
        yield ws


async def receive(ws: ClientConnection) -> dict[str, Any]:
    raw = await asyncio.wait_for(ws.recv(), RECV_S)
    assert isinstance(raw, str) and "\n" not in raw  # one KataGo line per message
    value: dict[str, Any] = json.loads(raw)
    return value


async def until(ws: ClientConnection, predicate: Any) -> list[dict[str, Any]]:
    """Messages up to and including the first one `predicate` accepts."""
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(UNTIL_S):
        while True:
            message = await receive(ws)
            seen.append(message)
            if predicate(message):
                return seen


def final(caller_id: str) -> Any:
    return lambda line: line.get("id") == caller_id and line.get("isDuringSearch") is False


async def get(server: Any, path: str) -> httpx.Response:
    async with httpx.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}, timeout=30) as client:
        return await client.get(server.url + path)


async def metric(server: Any, name: str) -> float:
    return metric_value((await get(server, "/metrics")).text, name)


async def engine_pending(server: Any) -> int:
    engines = (await get(server, "/readyz")).json()["engines"]
    return sum(int(engine.get("pending") or 0) for engine in engines)


async def poll(check: Callable[[], Awaitable[bool]], seconds: float, failure: str) -> None:
    for _ in range(int(seconds / POLL_S)):
        if await check():
            return
        await asyncio.sleep(POLL_S)
    raise AssertionError(failure)


async def wait_idle(server: Any) -> None:
    async def idle() -> bool:
        return not await engine_pending(server) and not await metric(server, "kgserve_inflight_queries")

    await poll(idle, 30, "queries still running on the engine")


async def test_a_query_answers_byte_for_byte_as_over_http(server: Any) -> None:
    sample = (REFERENCE / "samples" / "inputs" / "tsumego_straight3_9x9.json").read_bytes()
    async with httpx.AsyncClient(timeout=60) as client:
        over_http = await client.post(
            server.url + "/analysis", content=sample, headers={"authorization": f"Bearer {TOKEN}"}
        )
    assert over_http.status_code == 200
    expected = over_http.content.splitlines()
    async with session(server) as ws:
        await ws.send(sample.decode())
        raw = str(await asyncio.wait_for(ws.recv(), 60)).encode()
    assert len(expected) == 1
    assert raw == expected[0]


async def test_json_lines_in_one_message_and_the_raw_bytes(server: Any) -> None:
    async with session(server) as ws:
        await ws.send("\n".join(json.dumps(query(name, 20)) for name in ("a", "b")))
        texts: list[str] = []
        async with asyncio.timeout(60):
            while sum('"isDuringSearch":false' in text for text in texts) < 2:
                texts.append(str(await ws.recv()))
    ids = sorted(json.loads(text)["id"] for text in texts)
    assert ids == ["a", "b"]
    for text in texts:  # KataGo's own bytes: compact, keys sorted, the id first after nothing but sorted keys
        assert text.startswith('{"id":"') and ", " not in text[:40]


async def test_terminate_acts_on_this_connection_only(server: Any) -> None:
    async with session(server) as mine, session(server) as theirs:
        await mine.send(json.dumps(ponder("q")))
        await theirs.send(json.dumps(ponder("q")))
        await until(mine, lambda line: line.get("isDuringSearch") is True)
        await until(theirs, lambda line: line.get("isDuringSearch") is True)
        request = {"id": "stop", "action": "terminate", "terminateId": "q"}
        await mine.send(json.dumps(request))
        lines = await until(mine, final("q"))
        acks = [line for line in lines if line.get("action") == "terminate"]
        assert acks == [request]
        # the other connection's query with the same id is still searching
        partials = await until(theirs, lambda line: line.get("isDuringSearch") is True and line["id"] == "q")
        assert partials[-1]["rootInfo"]["visits"] > 0
        await theirs.send(json.dumps({"id": "all", "action": "terminate_all"}))
        lines = await until(theirs, final("q"))
        assert {"action": "terminate_all", "id": "all"} in lines
    await wait_idle(server)


async def test_an_idle_connection_outlives_the_http_timeouts(server: Any) -> None:
    async with session(server) as ws:
        await asyncio.sleep(HEADER_TIMEOUT_S * 3)  # KaTrain keeps its connection open, mostly idle, for hours
        await ws.send(json.dumps(query("later", 20)))
        await until(ws, final("later"))


async def test_a_message_over_the_body_limit_closes_the_connection(server: Any) -> None:
    async with session(server) as ws:
        await ws.send(json.dumps(query("huge", 10, padding="x" * (1 << 20))))  # limits.max_body_bytes: 1 MiB
        with pytest.raises(ConnectionClosedError) as closed:
            await ws.recv()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009  # message too big


async def test_terminate_ack_is_katagos_bytes(server: Any) -> None:
    async with session(server) as ws:
        await ws.send('{"id": "t1", "action": "terminate", "terminateId": "nothing", "turnNumbers": [3]}')
        assert await ws.recv() == '{"action":"terminate","id":"t1","terminateId":"nothing","turnNumbers":[3]}'
        await ws.send('{"id": "t2", "action": "terminate"}')
        assert json.loads(await ws.recv()) == {
            "error": 'Requests for a terminate action must have a string "terminateId" field',
            "field": "terminateId",
            "id": "t2",
        }


async def test_actions_query_version_answered_others_refused(server: Any) -> None:
    async with session(server) as ws:
        await ws.send(json.dumps({"id": "v", "action": "query_version"}))
        version = await receive(ws)
        assert version["action"] == "query_version" and version["id"] == "v" and version["version"]
        await ws.send(json.dumps({"id": "c", "action": "clear_cache"}))
        refused = await receive(ws)
        assert refused["id"] == "c" and refused["field"] == "action" and "clear_cache" in refused["error"]
        await ws.send(json.dumps({"id": "x", "action": "explode"}))
        errors = (REFERENCE / "protocol" / "errors.out.jsonl").read_text().splitlines()
        assert await ws.recv() in errors  # KataGo's exact line for an unknown action


async def test_visits_over_the_cap_are_clamped_with_a_warning(server: Any) -> None:
    async with session(server) as ws:
        await ws.send(json.dumps(ponder("big")))
        warning = await receive(ws)
        assert warning["id"] == "big" and warning["field"] == "maxVisits"
        assert "100000" in warning["warning"] and "10000000" in warning["warning"]
        await until(ws, lambda line: line.get("isDuringSearch") is True)
    await wait_idle(server)  # closing the connection terminated it


async def test_per_connection_bound_refuses_with_an_error_line(server: Any) -> None:
    async with session(server) as ws:
        for index in range(PER_CONNECTION + 1):
            await ws.send(json.dumps(ponder(f"p{index}", maxVisits=100_000)))
        refused = await until(ws, lambda line: "error" in line)
        assert refused[-1]["id"] == f"p{PER_CONNECTION}"
        assert "websocket.max_inflight_per_connection" in refused[-1]["error"]
        await ws.send(json.dumps({"id": "all", "action": "terminate_all"}))
        finals: set[str] = set()
        async with asyncio.timeout(60):
            while len(finals) < PER_CONNECTION:
                line = await receive(ws)
                if line.get("isDuringSearch") is False:
                    finals.add(line["id"])
        await ws.send(json.dumps(query("after", 20)))  # the connection stays usable
        await until(ws, final("after"))
    await wait_idle(server)
    assert await metric(server, "kgserve_websocket_queries_total") > 0


async def test_closing_the_connection_terminates_its_queries(server: Any) -> None:
    async with session(server) as ws:
        await ws.send(json.dumps(ponder("left")))
        await until(ws, lambda line: line.get("isDuringSearch") is True)
        assert await engine_pending(server) == 1
    await wait_idle(server)


async def test_a_client_that_stops_reading_is_cut_off(server: Any) -> None:
    before = await metric(server, 'kgserve_websocket_connections_total{outcome="not_reading"}')
    # max_queue=1: the client library stops reading the socket once one message waits, like a stuck GUI
    async with connect(ws_url(server), max_queue=1, max_size=None, open_timeout=30) as ws:
        for index in range(PER_CONNECTION):
            flood = query(f"flood{index}", 100_000, reportDuringSearchEvery=0.1, includeOwnership=True)
            await ws.send(json.dumps({**flood, "includePolicy": True}))

        async def cut_off() -> bool:
            return await metric(server, 'kgserve_websocket_connections_total{outcome="not_reading"}') > before

        await poll(cut_off, 120, "kgserve kept buffering for a client that does not read")
    await wait_idle(server)


async def test_auth_by_header_or_parameter(server: Any) -> None:
    base = server.url.replace("http://", "ws://") + "/ws"
    with pytest.raises(InvalidStatus) as refused:
        async with connect(base, open_timeout=30):
            pass
    assert refused.value.response.status_code == 401
    with pytest.raises(InvalidStatus):
        async with connect(base + "?token=wrong", open_timeout=30):
            pass
    async with connect(base, additional_headers={"Authorization": f"Bearer {TOKEN}"}, open_timeout=30) as ws:
        await ws.send(json.dumps({"id": "v", "action": "query_version"}))
        assert (await receive(ws))["id"] == "v"
    with pytest.raises(InvalidStatus) as bad_class:
        async with connect(ws_url(server, priority_class="urgent"), open_timeout=30):
            pass
    assert bad_class.value.response.status_code == 400

    async def logged() -> bool:  # kgserve's log reaches us through a pipe: polled, not a fixed wait
        log = "\n".join(server.lines())
        return bool(re.search(r"websocket id=\w+ /ws outcome=\w+", log)) and "token=<redacted>" in log

    await poll(logged, 30, "no access line with the redacted token for the WebSocket connections")
    assert TOKEN not in "\n".join(server.lines())


def test_http_priority_class_header(server: Any) -> None:
    headers = {"authorization": f"Bearer {TOKEN}"}
    body = json.dumps(query("h", 10)).encode()
    wrong = httpx.post(server.url + "/analysis", content=body, headers={**headers, "x-priority-class": "vip"})
    assert wrong.status_code == 400 and "X-Priority-Class" in wrong.json()["error"]
    ok = httpx.post(
        server.url + "/analysis", content=body, headers={**headers, "x-priority-class": "interactive"}, timeout=60
    )
    assert ok.status_code == 200 and json.loads(ok.content.splitlines()[-1])["id"] == "h"


async def test_a_terminate_is_bounded(server: Any) -> None:
    """issue 27, attack 3: a turnNumbers list longer than any query's turns is refused; a long list of one turn
    ends the query it names (the engine is sent that turn once: kgserve.engine.stream.QueryStream.claim_turns)."""
    async with session(server) as ws:
        huge = {"id": "huge", "action": "terminate", "terminateId": "p", "turnNumbers": list(range(1001))}
        await ws.send(json.dumps(huge))
        refused = await receive(ws)
        assert refused["id"] == "huge" and refused["field"] == "turnNumbers"
        assert "limits.max_turns_per_query" in refused["error"]
        await ws.send(json.dumps(ponder("p")))
        await until(ws, lambda line: line.get("isDuringSearch") is True)
        request = {"id": "t", "action": "terminate", "terminateId": "p", "turnNumbers": [3] * 1000}  # 3 moves
        await ws.send(json.dumps(request))
        lines = await until(ws, final("p"))
        assert request in lines  # KataGo's acknowledgement: the request itself
    await wait_idle(server)
