"""The thread reserve through kgserve's front ends (issue 27's slot hog): a client's WebSocket queries holding every
analysis thread but the reserve, with long searches; another address's HTTP query is answered meanwhile, the hog's
further queries wait in kgserve (the held-queries gauge), and the hog's terminate of a held query is answered with
KataGo's `noResults` line at once. Real kgserve, simulated engine with four analysis threads. Behaviour only."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.conftest import analysis_query, serving_cfg_with_threads
from tests.helpers.http import metric_value

pytestmark = pytest.mark.slow

THREADS = 4  # with the reserve share 1/4: one thread kept for clients holding at most one
HOG_QUERIES = 6  # 3 run, 3 wait in kgserve
LONG = 100_000  # visits (the cap, limits.max_visits): searches that run until terminated


@pytest.fixture(scope="module")
def start(tmp_path_factory: pytest.TempPathFactory, config_writer: Any, kgserve_process: Any) -> Iterator[Callable]:
    started: list[Any] = []

    def run(share: float) -> Any:
        directory = tmp_path_factory.mktemp("kgserve")
        cfg = serving_cfg_with_threads(Path(directory), THREADS)
        config = config_writer(directory, engine={"cfg": str(cfg), "thread_reserve": share})
        process = kgserve_process(config, {"KGSERVE_SIM_SPEED": "1"})
        started.append(process)
        process.wait_listening()
        process.wait_ready()
        return process

    yield run
    for process in started:
        process.stop()


async def _held(client: httpx.AsyncClient, url: str) -> float:
    return metric_value((await client.get(url + "/metrics")).text, "kgserve_held_queries")


async def _hog_then_newcomer(url: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    ws_url = url.replace("http://", "ws://") + "/ws"
    async with (
        connect(ws_url, max_size=None, local_addr=("127.0.1.7", 0), open_timeout=30) as hog,
        httpx.AsyncClient(timeout=60) as http,
        asyncio.timeout(90),
    ):
        for index in range(HOG_QUERIES):
            await hog.send(json.dumps(analysis_query(f"h{index}", moves=[["B", "Q4"]], max_visits=LONG)))
        for _ in range(5000):  # every hog query admitted before the newcomer comes
            if metric_value((await http.get(url + "/metrics")).text, "kgserve_inflight_queries") >= HOG_QUERIES:
                break
            await asyncio.sleep(0.02)
        seen["held"] = await _held(http, url)
        body = json.dumps(analysis_query("newcomer", moves=[["B", "D4"]], max_visits=20)).encode()
        answer = await http.post(url + "/analysis", content=body)
        seen["newcomer"] = (answer.status_code, json.loads(answer.content.splitlines()[-1]))
        seen["held_after"] = await _held(http, url)
        await hog.send(json.dumps({"id": "t", "action": "terminate", "terminateId": f"h{HOG_QUERIES - 1}"}))
        lines = [json.loads(await hog.recv()) for _ in range(2)]
        seen["terminated"] = [line for line in lines if line.get("id") == f"h{HOG_QUERIES - 1}"]
        await hog.send(json.dumps({"id": "all", "action": "terminate_all"}))
        finals = set()
        while len(finals) < HOG_QUERIES - 1:
            line = json.loads(await hog.recv())
            if line.get("isDuringSearch") is False:
                finals.add(line["id"])
        seen["held_end"] = await _held(http, url)
    return seen


def test_another_clients_query_gets_the_reserved_thread(start: Callable) -> None:
    server = start(0.25)
    seen = asyncio.run(_hog_then_newcomer(server.url))
    assert seen["held"] == HOG_QUERIES - (THREADS - 1)
    status, last = seen["newcomer"]
    assert status == 200 and last["id"] == "newcomer" and last["isDuringSearch"] is False and "moveInfos" in last
    assert seen["held_after"] == HOG_QUERIES - (THREADS - 1)  # the hog's extra queries still wait
    # KataGo's answer to a terminated query that had not started (katago-reference terminate_queued)
    assert seen["terminated"] == [
        {"id": f"h{HOG_QUERIES - 1}", "isDuringSearch": False, "noResults": True, "turnNumber": 1}
    ]
    assert seen["held_end"] == 0
