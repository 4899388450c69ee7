"""A WebSocket flood of small invalid lines (issue 36), end to end against kgserve on the simulated engine: the
flooder reads every answer (no send-buffer guard trips), and is read at its bounds' pace (`websocket.
max_messages_per_s`, `limits.max_messages_per_s_per_client`, set low here), told so with an error line without an
id, while another client (127.0.0.1, over HTTP) is answered. Behaviour only: the figures are benchmarks.hostile's
(`--only ws-message-flood`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.conftest import analysis_query
from tests.helpers.http import metric_value

pytestmark = pytest.mark.slow

PER_CONNECTION = 200
PER_CLIENT = 300
FLOOD = 3_000  # small invalid lines sent at once: 15 s of a connection's bound
SLACK = 60  # answers beyond the bound's own (the clocks of two processes, a turn's share)
VICTIM = json.dumps(analysis_query("victim", size=9, max_visits=5)).encode()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, config_writer: Any, kgserve_process: Any) -> Iterator[Any]:
    config = config_writer(
        tmp_path_factory.mktemp("kgserve"),
        websocket={"max_messages_per_s": PER_CONNECTION},
        limits={"max_messages_per_s_per_client": PER_CLIENT},
    )
    process = kgserve_process(config, {"KGSERVE_SIM_SPEED": "1"})
    process.wait_listening()
    process.wait_ready()
    yield process
    process.stop()


class Flooder:
    """A WebSocket from `address` that sends FLOOD lines `x` at once and reads every answer."""

    def __init__(self) -> None:
        self.answers = 0
        self.notices: list[str] = []
        self.began = 0.0

    async def run(self, ws: ClientConnection) -> None:
        self.began = time.monotonic()
        for _ in range(FLOOD):
            await ws.send("x")
        with contextlib.suppress(Exception):
            async for raw in ws:
                line = json.loads(raw)
                if "limit" in line.get("error", "") and "id" not in line:
                    self.notices.append(line["error"])
                else:
                    self.answers += 1

    def most(self, rate: int) -> float:
        """The most answers the bound lets through by now: a second's burst, then `rate` a second."""
        return rate + rate * (time.monotonic() - self.began) + SLACK


def ws_url(server: Any) -> str:
    return server.url.replace("http://", "ws://") + "/ws"


async def test_a_flooding_websocket_is_read_at_its_bound_while_another_client_is_answered(server: Any) -> None:
    flooder = Flooder()
    async with connect(ws_url(server), local_addr=("127.0.1.31", 0), max_size=None) as ws:
        flooding = asyncio.create_task(flooder.run(ws))
        await asyncio.sleep(1.0)
        async with httpx.AsyncClient(timeout=30) as client:
            answer = await client.post(server.url + "/analysis", content=VICTIM)  # from 127.0.0.1
            assert answer.status_code == 200 and json.loads(answer.text.splitlines()[-1])["isDuringSearch"] is False
            assert flooder.answers < FLOOD // 2  # answered with most of the flood still unread
            assert (await client.get(server.url + "/healthz")).status_code == 200
            await asyncio.sleep(1.0)
            assert flooder.answers <= flooder.most(PER_CONNECTION)
            paced = metric_value(
                (await client.get(server.url + "/metrics")).text,
                'kgserve_websocket_paced_messages_total{bound="connection"}',
            )
        flooding.cancel()
        await asyncio.gather(flooding, return_exceptions=True)
    assert paced > 0
    # told, in KataGo's shape for a line that is no query (an error without an id), at most once a second
    assert flooder.notices and 1 <= len(flooder.notices) <= 3
    assert flooder.notices[0] == (
        f"kgserve: over the limit of {PER_CONNECTION} messages a second on this connection "
        "(websocket.max_messages_per_s); its next messages are read at that rate"
    )


async def test_a_clients_connections_share_its_bound(server: Any) -> None:
    flooders = [Flooder(), Flooder()]
    async with (
        connect(ws_url(server), local_addr=("127.0.1.32", 0), max_size=None) as first,
        connect(ws_url(server), local_addr=("127.0.1.32", 0), max_size=None) as second,
    ):
        tasks = [asyncio.create_task(f.run(ws)) for f, ws in zip(flooders, (first, second), strict=True)]
        await asyncio.sleep(2.0)
        answered = sum(f.answers for f in flooders)
        assert answered <= flooders[0].most(PER_CLIENT)  # two connections' bounds would let 2 x 200 a second
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    notices = [text for f in flooders for text in f.notices]
    assert any("limits.max_messages_per_s_per_client" in text for text in notices), notices
