"""Issue 15 against the real KataGo: priority classes reorder its queue, and the WebSocket's actions reach it.

One analysis thread, so the queue is what decides the order of work.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from tests.conftest import analysis_query
from tests.helpers.http import metric_value
from tests.katago.conftest import RealKatago, start_kgserve, tier_config

pytestmark = pytest.mark.katago

MOVES = [["B", "Q16"], ["W", "D4"], ["B", "Q4"]]
WAIT_S = 120.0
OUTSTANDING = "kgserve_engine_outstanding_visits"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, real_katago: RealKatago) -> Iterator[Any]:
    config = tier_config(
        tmp_path_factory.mktemp("kgserve-katago-interactive"),
        real_katago,
        cfg={"numAnalysisThreads": 1},
        limits={"max_visits": 100_000},
        priority={"fairness": True},  # the fairness test's levels (off by default); interactive overtakes either way
    )
    process = start_kgserve(config)
    yield process
    process.stop()


def query(caller_id: str, visits: int, *, position: int = 0, **extra: Any) -> dict[str, Any]:
    """A query of MOVES, with a White move more for `position` > 0: queries whose order of answers is compared
    search positions of their own, or KataGo's NN cache makes the later searches take milliseconds and their
    answers race each other across connections."""
    moves = [*MOVES, ["W", f"{'CDEFGHJKLMN'[position - 1]}17"]] if position else MOVES
    return analysis_query(caller_id, moves=moves, max_visits=visits, **extra)


async def final_of(ws: ClientConnection, caller_id: str) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    async with asyncio.timeout(WAIT_S):
        while not (lines and lines[-1].get("id") == caller_id and lines[-1].get("isDuringSearch") is False):
            lines.append(json.loads(await ws.recv()))
    return lines


async def _until_sent_to_engine(client: httpx.AsyncClient, visits: int) -> None:
    """Wait until kgserve has handed the engine queries worth `visits` (fixed sleeps lose on a loaded machine)."""
    async with asyncio.timeout(WAIT_S):
        while True:
            text = (await client.get("/metrics")).text
            sent = sum(
                float(line.rsplit(" ", 1)[1])
                for line in text.splitlines()
                if line.startswith("kgserve_engine_outstanding_visits{")
            )
            if sent >= visits:
                return
            await asyncio.sleep(0.05)


@pytest.mark.alone  # KataGo's stdin reader must queue what kgserve wrote within 0.5 s: an idle machine's time
async def test_an_interactive_query_overtakes_queued_batch_work(server: Any) -> None:
    finished: list[str] = []
    ws_url = server.url.replace("http://", "ws://") + "/ws"

    async with httpx.AsyncClient(base_url=server.url, timeout=WAIT_S) as client:

        async def batch(caller_id: str) -> None:
            body = json.dumps(query(caller_id, 20, position=1 + int(caller_id[-1])))
            response = await client.post("/analysis", content=body, headers={"x-priority-class": "batch"})
            assert response.status_code == 200, response.text
            finished.append(caller_id)

        async with connect(ws_url + "?priority_class=batch", open_timeout=30) as holder, connect(ws_url) as user:
            # a long batch search takes the only search thread until it is terminated below
            await holder.send(json.dumps(query("busy", 100_000, reportDuringSearchEvery=0.1)))
            async with asyncio.timeout(WAIT_S):
                while json.loads(await holder.recv()).get("isDuringSearch") is not True:
                    pass
            queued = []
            for index in range(2):  # in KataGo's queue, in this order: each is written to its stdin before the next
                queued.append(asyncio.create_task(batch(f"batch{index}")))
                await _until_sent_to_engine(client, 100_000 + 20 * (index + 1))
            await user.send(json.dumps(query("interactive", 20, position=3)))  # interactive: the WebSocket's default
            await _until_sent_to_engine(client, 100_000 + 3 * 20)
            await asyncio.sleep(0.5)  # kgserve wrote them to KataGo's stdin: give its reader thread time to queue them
            await holder.send(json.dumps({"id": "stop", "action": "terminate", "terminateId": "busy"}))
            await final_of(user, "interactive")
            finished.append("interactive")
            await asyncio.gather(*queued)
    # the freed thread took the interactive query although both batch queries arrived before it
    assert finished == ["interactive", "batch0", "batch1"]


@pytest.mark.alone  # KataGo's stdin reader must queue what kgserve wrote within 0.5 s: an idle machine's time
async def test_another_clients_query_overtakes_one_clients_queued_backlog(server: Any) -> None:
    """Fairness levels (kgserve.admission.priority) on the real engine: its queue honours them, the priorities
    appended to the client's own bytes included."""
    finished: list[str] = []
    hog_url = server.url.replace("http://", "ws://") + "/ws?priority_class=batch"
    transport = httpx.AsyncHTTPTransport(local_address="127.0.1.8")  # a client of its own, whatever ran before
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=WAIT_S, transport=transport) as newcomer,
        connect(hog_url, open_timeout=30, local_addr=("127.0.1.7", 0)) as hog,
    ):
        async with asyncio.timeout(WAIT_S):  # the visits waited for below are this test's alone
            while True:
                text = (await newcomer.get("/metrics")).text
                if not metric_value(text, "kgserve_inflight_queries") + metric_value(text, OUTSTANDING):
                    break
                await asyncio.sleep(0.05)
        await hog.send(json.dumps(query("busy", 100_000, reportDuringSearchEvery=0.1)))  # takes the only thread
        async with asyncio.timeout(WAIT_S):
            while json.loads(await hog.recv()).get("isDuringSearch") is not True:
                pass
        for index in range(4):
            await hog.send(json.dumps(query(f"hog{index}", 20, position=2 + index)))
        await _until_sent_to_engine(newcomer, 100_000 + 4 * 20)

        async def newcomers_query() -> None:
            response = await newcomer.post("/analysis", content=json.dumps(query("newcomer", 20, position=1)))
            assert response.status_code == 200, response.text
            finished.append("newcomer")

        task = asyncio.create_task(newcomers_query())
        await _until_sent_to_engine(newcomer, 100_000 + 5 * 20)
        await asyncio.sleep(0.5)  # kgserve wrote it to KataGo's stdin: give its reader thread time to queue it
        await hog.send(json.dumps({"id": "stop", "action": "terminate", "terminateId": "busy"}))
        async with asyncio.timeout(WAIT_S):
            while len([name for name in finished if name.startswith("hog")]) < 4:
                line = json.loads(await hog.recv())
                if line.get("isDuringSearch") is False and line["id"].startswith("hog"):
                    finished.append(line["id"])
        await task
    # the freed thread took the newcomer's query, its client's first, before the hog's second to fifth
    assert finished[0] == "newcomer" and finished[1:] == ["hog0", "hog1", "hog2", "hog3"]


async def test_websocket_actions_reach_the_real_engine(server: Any) -> None:
    async with connect(server.url.replace("http://", "ws://") + "/ws", open_timeout=30) as ws:
        await ws.send(json.dumps({"id": "v", "action": "query_version"}))
        version = json.loads(await ws.recv())
        assert version["id"] == "v" and version["version"][0].isdigit() and "git_hash" in version
        # three turns queued on one thread; terminate turn 2 only, then everything
        await ws.send(json.dumps(query("game", 5000, analyzeTurns=[1, 2, 3], reportDuringSearchEvery=0.2)))
        async with asyncio.timeout(WAIT_S):
            while json.loads(await ws.recv()).get("isDuringSearch") is not True:
                pass
        request = {"id": "t", "action": "terminate", "terminateId": "game", "turnNumbers": [2]}
        await ws.send(json.dumps(request))
        turn_two: list[dict[str, Any]] = []
        async with asyncio.timeout(WAIT_S):
            acked = False
            while not turn_two or not acked:
                line = json.loads(await ws.recv())
                acked = acked or line == request
                if line.get("turnNumber") == 2 and line.get("isDuringSearch") is False:
                    turn_two.append(line)
        assert turn_two[0].get("noResults") is True  # it was still queued: KataGo drops it
        await ws.send(json.dumps({"id": "all", "action": "terminate_all"}))
        finals = {2}
        async with asyncio.timeout(WAIT_S):
            while finals != {1, 2, 3}:
                line = json.loads(await ws.recv())
                if line.get("id") == "game" and line.get("isDuringSearch") is False:
                    finals.add(line["turnNumber"])
