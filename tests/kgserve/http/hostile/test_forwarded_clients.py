"""Clients behind a trusted proxy (server.trusted_proxies), end to end against kgserve on the simulated engine (real
time): with 127.0.0.1 trusted, requests from 127.0.0.1 are the clients their X-Forwarded-For names, each with its
own caps (queries in flight, connections), and the access log names them; a header from any other peer, or from
127.0.0.1 when nothing is trusted, is ignored. The caps engage only among clients that contend (issue 40): a
bystander (127.0.1.200) holds a query in flight while a share is asserted, and the connection cap engages in the
last 1/8 of `limits.max_connections`. The "proxy" is this test speaking HTTP from 127.0.0.1; other peers
use addresses of their own (127.0.1.x: Linux routes all of 127/8 to loopback)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

from tests.conftest import analysis_query
from tests.helpers.http import metric_value

pytestmark = pytest.mark.slow

PER_CLIENT = 2
CONNECTIONS = 3
SMALL = json.dumps(analysis_query("small", size=9, max_visits=5)).encode()
BUDGET = 16  # limits.max_connections: 14 open to anyone, the last 2 only for clients under their cap
LIMITS = {
    "max_inflight_per_client": PER_CLIENT,
    "max_connections_per_client": CONNECTIONS,
    "max_connections": BUDGET,
    "hold_past_share_s": 0.5,  # a request past its share waits this long for room (issue 40), then gets its 429
}


def _start(
    tmp_path_factory: pytest.TempPathFactory, config_writer: Any, kgserve_process: Any, proxies: list[str]
) -> Any:
    config = config_writer(tmp_path_factory.mktemp("kgserve"), server={"trusted_proxies": proxies}, limits=LIMITS)
    process = kgserve_process(config, {"KGSERVE_SIM_SPEED": "1"})
    process.wait_listening()
    process.wait_ready()
    return process


@pytest.fixture(scope="module")
def behind_proxy(tmp_path_factory: pytest.TempPathFactory, config_writer: Any, kgserve_process: Any) -> Iterator[Any]:
    process = _start(tmp_path_factory, config_writer, kgserve_process, ["127.0.0.1"])
    yield process
    process.stop()


@pytest.fixture(scope="module")
def trusting_nobody(
    tmp_path_factory: pytest.TempPathFactory, config_writer: Any, kgserve_process: Any
) -> Iterator[Any]:
    process = _start(tmp_path_factory, config_writer, kgserve_process, [])
    yield process
    process.stop()


def _from(address: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(local_address=address), timeout=60)


def _ws_url(server: Any) -> str:
    return str(server.url).replace("http://", "ws://") + "/ws"


@contextlib.asynccontextmanager
async def _holding_its_share(server: Any, forwarded_for: str, peer: str = "127.0.0.1") -> AsyncIterator[None]:
    """A WebSocket from `peer` naming `forwarded_for` holds PER_CLIENT pondering queries (the one past them is
    refused naming the per-client cap: a bystander has a query in flight, so they contend), until the block ends."""
    headers = {"X-Forwarded-For": forwarded_for}
    async with (
        connect(_ws_url(server), local_addr=("127.0.1.200", 0), open_timeout=30) as bystander,
        connect(_ws_url(server), additional_headers=headers, local_addr=(peer, 0), open_timeout=30) as ws,
    ):
        await bystander.send(json.dumps(analysis_query("b", moves=[["B", "Q4"]], max_visits=10_000_000)))
        async with _from("127.0.1.201") as watcher, asyncio.timeout(60):
            while metric_value((await watcher.get(server.url + "/metrics")).text, "kgserve_inflight_queries") < 1:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        for index in range(PER_CLIENT + 1):
            await ws.send(json.dumps(analysis_query(f"p{index}", moves=[["B", "Q4"]], max_visits=10_000_000)))
        refusal = await _first_error(ws)
        assert refusal["id"] == f"p{PER_CLIENT}" and "limits.max_inflight_per_client" in refusal["error"]
        try:
            yield
        finally:
            await ws.send(json.dumps({"id": "all", "action": "terminate_all"}))
            await bystander.send(json.dumps({"id": "all", "action": "terminate_all"}))


async def _first_error(ws: ClientConnection) -> dict[str, Any]:
    async with asyncio.timeout(60):
        while True:
            line = json.loads(await ws.recv())
            if "error" in line:
                return line


async def _post(client: httpx.AsyncClient, url: str, forwarded_for: str | None) -> httpx.Response:
    headers = {"x-forwarded-for": forwarded_for} if forwarded_for is not None else {}
    return await client.post(url + "/analysis", content=SMALL, headers=headers)


async def test_each_forwarded_client_has_its_own_share(behind_proxy: Any) -> None:
    url = behind_proxy.url
    async with _holding_its_share(behind_proxy, "203.0.113.1"), _from("127.0.0.1") as proxy:
        same = await _post(proxy, url, "198.51.100.66, 203.0.113.1")  # what it wrote itself counts for nothing
        assert same.status_code == 429 and "limits.max_inflight_per_client" in same.text
        assert (await _post(proxy, url, "203.0.113.2")).status_code == 200  # another client behind the proxy
        assert (await _post(proxy, url, None)).status_code == 200  # the proxy's own request: the proxy's share
    async with _from("127.0.0.1") as proxy:  # its queries terminated: its share comes back
        assert await _eventually(lambda: _post(proxy, url, "203.0.113.1"), 200)


async def test_a_header_from_an_untrusted_peer_is_ignored(behind_proxy: Any) -> None:
    url = behind_proxy.url
    async with _holding_its_share(behind_proxy, "203.0.113.3", peer="127.0.1.5"):
        async with _from("127.0.1.5") as untrusted:  # whatever it claims to be, it is 127.0.1.5
            forged = await _post(untrusted, url, "203.0.113.99")
            assert forged.status_code == 429 and "limits.max_inflight_per_client" in forged.text
        async with _from("127.0.0.1") as proxy:  # the client it named was never charged
            assert (await _post(proxy, url, "203.0.113.3")).status_code == 200


async def test_connections_count_per_forwarded_client_not_per_proxy(behind_proxy: Any) -> None:
    url = behind_proxy.url
    open_part = BUDGET - BUDGET // 8
    async with contextlib.AsyncExitStack() as stack:
        # alone, a client passes its cap while connections are free (issue 40), up to the budget's open part
        held = [await stack.enter_async_context(_ws(behind_proxy, "203.0.113.4")) for _ in range(open_part)]
        with pytest.raises(InvalidStatus) as refused:
            async with _ws(behind_proxy, "203.0.113.4"):
                pass
        assert refused.value.response.status_code == 429
        assert b"limits.max_connections_per_client" in refused.value.response.body
        async with _from("127.0.0.1") as proxy:
            over = await _post(proxy, url, "203.0.113.4")
            assert over.status_code == 429 and over.headers["retry-after"] == "1"
            assert "limits.max_connections_per_client" in over.text
            while len(held) > CONNECTIONS:  # back under the open part: its cap no longer engages
                await held.pop().close()
            assert await _eventually(lambda: _post(proxy, url, "203.0.113.4"), 200)
            # more proxy connections than the cap, each for another client: none is refused
            many = [_from("127.0.0.1") for _ in range(CONNECTIONS + 3)]
            async with contextlib.AsyncExitStack() as clients:
                for client in many:
                    await clients.enter_async_context(client)
                answers = await asyncio.gather(*(_post(c, url, f"203.0.113.{50 + i}") for i, c in enumerate(many)))
            assert [a.status_code for a in answers] == [200] * len(many)
            await held.pop().close()
            assert await _eventually(lambda: _post(proxy, url, "203.0.113.4"), 200)


def _ws(server: Any, forwarded_for: str) -> Any:
    headers = {"X-Forwarded-For": forwarded_for}
    return connect(_ws_url(server), additional_headers=headers, local_addr=("127.0.0.1", 0), open_timeout=30)


async def test_access_lines_name_the_forwarded_client_and_bad_headers_fall_back(behind_proxy: Any) -> None:
    url = behind_proxy.url
    async with _from("127.0.0.1") as proxy:
        assert (await _post(proxy, url, "[2001:DB8::7]:4711")).status_code == 200
        async with _ws(behind_proxy, "203.0.113.8") as ws:
            await ws.send(SMALL.decode())
            assert json.loads(await asyncio.wait_for(ws.recv(), 60))["id"] == "small"
        before = metric_value((await proxy.get(url + "/metrics")).text, "kgserve_forwarded_for_invalid_total")
        garbled = await _post(proxy, url, "203.0.113.9, not-an-address")
        assert garbled.status_code == 200  # served, as the proxy's own client
        after = metric_value((await proxy.get(url + "/metrics")).text, "kgserve_forwarded_for_invalid_total")
        assert after == before + 1
    text = await _eventually_text(behind_proxy, " client=203.0.113.8 ")
    access = [line for line in text.splitlines() if "kgserve.access" in line]
    assert any("POST /analysis status=200" in line and " client=2001:db8::7 " in line for line in access), access
    assert any(
        line.split("kgserve.access: ")[1].startswith("websocket") and " client=203.0.113.8 " in line for line in access
    )
    assert "X-Forwarded-For from trusted proxy 127.0.0.1 cannot be read" in text and "not-an-address" in text


async def test_with_nothing_trusted_the_header_is_ignored(trusting_nobody: Any) -> None:
    url = trusting_nobody.url
    async with _holding_its_share(trusting_nobody, "203.0.113.1"), _from("127.0.0.1") as same_address:
        other = await _post(same_address, url, "203.0.113.2")  # another "client": the same address, its share taken
        assert other.status_code == 429 and "limits.max_inflight_per_client" in other.text
    text = trusting_nobody.text()
    assert "client=" not in text and "X-Forwarded-For" not in text


async def _eventually(request: Any, status: int) -> bool:
    for _ in range(100):  # kgserve gives the slots back as the terminated queries end, the connection as it goes
        if (await request()).status_code == status:
            return True
        await asyncio.sleep(0.1)
    return False


async def _eventually_text(server: Any, needle: str) -> str:
    for _ in range(100):  # the log is read from the process's stderr by a thread
        text: str = server.text()
        if needle in text:
            return text
        await asyncio.sleep(0.1)
    return str(server.text())
