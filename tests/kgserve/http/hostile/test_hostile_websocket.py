"""WebSockets under backpressure and at shutdown (issue 27, attacks 2, 4 and 10), end to end against kgserve on the
simulated engine: a client that sends pings and never reads, a client cut off for not reading, SIGTERM with queries
in flight. Clients that never read are raw sockets with a small receive buffer (benchmarks.hostile_attacks.common:
the benchmark's own attackers). Behaviour only: the figures are benchmarks.hostile's."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from websockets.asyncio.client import connect

from benchmarks.hostile_attacks.common import peer_gone, raw_websocket, ws_frame
from tests.conftest import analysis_query

pytestmark = pytest.mark.slow

SEND_TIMEOUT_S = 2.0
GRACE_S = 3.0
SHUTDOWN_TEXT = "kgserve is shutting down: this query was terminated"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, config_writer: Any, kgserve_process: Any) -> Iterator[Any]:
    config = config_writer(
        tmp_path_factory.mktemp("kgserve"),
        server={"send_timeout_s": SEND_TIMEOUT_S},
        websocket={"send_buffer_bytes": 65536},
    )
    process = kgserve_process(config, {"KGSERVE_SIM_SPEED": "1"})
    process.wait_listening()
    process.wait_ready()
    yield process
    process.stop()


def port_of(server: Any) -> int:
    return int(server.url.rsplit(":", 1)[1])


async def gone_within(writer: asyncio.StreamWriter, seconds: float) -> bool:
    for _ in range(int(seconds / 0.1)):
        if peer_gone(writer):
            return True
        await asyncio.sleep(0.1)
    return False


def fds(server: Any) -> int:
    return int(psutil.Process(server.proc.pid).num_fds())


async def fds_back(server: Any, before: int) -> bool:
    for _ in range(100):
        if fds(server) <= before:
            return True
        await asyncio.sleep(0.1)
    return False


async def test_a_client_that_pings_and_never_reads_is_reset(server: Any) -> None:
    before = fds(server)
    _, writer = await raw_websocket(port_of(server), "127.0.1.1", rcvbuf=4096)
    burst = ws_frame(0x9, b"p" * 125) * 256
    try:
        for _ in range(400):  # until kgserve stops reading us (it answers no ping while we read nothing)
            writer.write(burst)
            try:
                await asyncio.wait_for(writer.drain(), 1.0)
            except TimeoutError:
                break
            except ConnectionError:
                break
        assert await gone_within(writer, SEND_TIMEOUT_S + 30), "kgserve kept the connection of a client not reading"
    finally:
        writer.close()
    assert await fds_back(server, before)


async def test_a_client_cut_off_for_not_reading_loses_its_socket(server: Any) -> None:
    before = fds(server)
    _, writer = await raw_websocket(port_of(server), "127.0.1.2", rcvbuf=4096)
    try:
        for index in range(4):
            query = analysis_query(f"c{index}", max_visits=100_000, reportDuringSearchEvery=0.1)
            query.update(includeOwnership=True, includePolicy=True)
            writer.write(ws_frame(0x1, json.dumps(query).encode()))
        # the socket is reset, not closed: a close would keep it (and its unread megabytes) while we live
        assert await gone_within(writer, SEND_TIMEOUT_S + 60), "the cut-off connection is still established"
    finally:
        writer.close()
    assert await fds_back(server, before)


async def test_sigterm_drains_websocket_queries_then_closes_1001(
    tmp_path_factory: pytest.TempPathFactory, config_writer: Any, kgserve_process: Any
) -> None:
    config = config_writer(tmp_path_factory.mktemp("kgserve"), server={"grace_period_s": GRACE_S})
    process = kgserve_process(config, {"KGSERVE_SIM_SPEED": "1"})
    process.wait_listening()
    process.wait_ready()
    lines: list[dict[str, Any]] = []
    try:
        async with connect(process.url.replace("http://", "ws://") + "/ws", max_size=None, open_timeout=30) as ws:
            for index in range(10):  # half finish within the grace period, half never would
                visits = 50 if index % 2 else 10_000_000
                await ws.send(json.dumps(analysis_query(f"d{index}", moves=[["B", "Q4"]], max_visits=visits)))
            await asyncio.sleep(1.0)
            stopper = threading.Thread(target=process.stop)
            began = time.monotonic()
            stopper.start()
            with contextlib.suppress(Exception):
                async for raw in ws:
                    lines.append(json.loads(raw))
            closed_after = time.monotonic() - began
            code = ws.close_code
            await asyncio.to_thread(stopper.join, 60)
    finally:
        process.stop()
    answered = {line["id"] for line in lines if line.get("isDuringSearch") is False}
    told = {line["id"] for line in lines if line.get("error") == SHUTDOWN_TEXT}
    assert answered | told == {f"d{index}" for index in range(10)}, lines
    assert {f"d{index}" for index in range(0, 10, 2)} <= told  # the endless ones: an error line each
    assert code == 1001
    assert closed_after >= GRACE_S / 2  # the grace period was given (not closed at once with 1012)
    assert process.proc.returncode == 0
