"""Issue 40: one batch client at high concurrency, against kgserve on its SHIPPED limits (runtime/config.yaml
untouched; the simulated engine sped up), gets every row: one address, aiohttp with 512 and 1,024 connections, a
60 s timeout, 3 attempts 1 s and 2 s apart, Retry-After not read (benchmarks.batch_client, the same client the
real-KataGo benchmark runs). Before issue 40, past 64 connections each new one got 429 and was closed at accept,
and the same client lost most of its rows. A second client (127.0.0.2) sending small queries beside the
512-connection batch is served, during the batch, while the batch still gets every row. Behaviour only: the
figures (rows/s, the second client's latency) are the benchmark's (docs/http-limits.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.batch_client import batch_rows, run_batch, second_client
from tests.helpers.http import metric

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory, config_writer: Any, kgserve_process: Any) -> Iterator[Any]:
    config = config_writer(tmp_path_factory.mktemp("kgserve"))  # runtime/config.yaml's limits as shipped
    process = kgserve_process(config, {"KGSERVE_SIM_SPEED": "20"})
    process.wait_listening()
    process.wait_ready()
    yield process
    process.stop()


@pytest.mark.parametrize("connections", [512, 1024])
async def test_a_batch_client_alone_gets_every_row(shipped: Any, connections: int) -> None:
    rows = batch_rows(connections + 64)  # more rows than connections: every connection is opened and reused
    result = await run_batch(shipped.url, rows, connections)
    assert result.answered == len(rows), result.statuses
    assert not result.statuses  # not one attempt failed: nothing refused, nothing retried
    assert [answer["id"] for answer in result.answers] == [row["id"] for row in rows]
    assert metric(shipped.url, "kgserve_refusals_total") == 0


async def test_a_second_client_is_served_beside_the_batch(shipped: Any) -> None:
    rows = batch_rows(576)
    stop = asyncio.Event()
    beside = asyncio.create_task(second_client(shipped.url, stop=stop, interval_s=0.05))
    result = await run_batch(shipped.url, rows, 512)
    stop.set()
    probes = await beside
    assert result.answered == len(rows), result.statuses
    assert probes and all(status == 200 for status, _ in probes), probes
    # a second query was sent only after the first was answered and before the batch was over: the second client
    # was served during the batch, not after it
    assert len(probes) >= 2, probes
