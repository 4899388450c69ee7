"""limits.max_requests_per_s_per_client (kgserve.http.pacing, issue 36): while another client has a request in
progress, a client's requests past a second's worth wait their turn and say so (`X-Paced-Ms`,
`kgserve_requests_paced_total`); the other client is not slowed; a client alone is never paced (issue 40: the bound
is among clients that contend); 0 is no bound. In-process, through the app's own middleware (httpx's ASGI transport
names the client)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx

from kgserve.app import create_app
from tests.helpers.http import metric_value

RATE = 20


def client_from(app: Any, address: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=(address, 1234)), base_url="http://t")


async def _slow_body(done: asyncio.Event) -> AsyncIterator[bytes]:
    """A request body that ends only once `done` is set: its request stays in progress until then."""
    yield b'{"id":"a",'
    await done.wait()
    yield b'"moves":[]}'


async def test_a_client_alone_is_never_paced(settings_factory: Any) -> None:
    # issue 40: nobody else wants the server, so a lone client's rate is not bounded (work-conserving)
    app = create_app(settings_factory(limits={"max_requests_per_s_per_client": RATE}))
    async with client_from(app, "10.0.0.1") as alone:
        answers = await asyncio.gather(*(alone.get("/healthz") for _ in range(3 * RATE)))
        metrics = await alone.get("/metrics")
    assert all(answer.status_code == 200 and "x-paced-ms" not in answer.headers for answer in answers)
    assert metric_value(metrics.text, "kgserve_requests_paced_total") == 0


async def test_requests_past_the_clients_bound_wait_and_say_so_another_client_does_not(settings_factory: Any) -> None:
    app = create_app(settings_factory(limits={"max_requests_per_s_per_client": RATE}))
    async with client_from(app, "10.0.0.1") as flood, client_from(app, "10.0.0.2") as other:
        done = asyncio.Event()
        in_progress = asyncio.create_task(other.post("/analysis", content=_slow_body(done)))  # the two contend
        while not app.state.kgserve.admission.clients.clients:  # noqa: ASYNC110 (its request is in: reading its body)
            await asyncio.sleep(0.01)
        answers = await asyncio.gather(*(flood.get("/healthz") for _ in range(2 * RATE)))
        done.set()
        await in_progress
        assert all(answer.status_code == 200 for answer in answers)
        waits = sorted(int(answer.headers.get("x-paced-ms", 0)) for answer in answers)
        paced = [wait for wait in waits if wait]
        assert waits[:RATE] == [0] * RATE  # a second's worth at once (and any the bucket refilled meanwhile)
        assert len(paced) >= RATE // 2 and paced[-1] >= 500  # then one every 1/RATE s: the last ~1 s after the first
        alone = await other.get("/healthz")
        assert alone.status_code == 200 and "x-paced-ms" not in alone.headers
        metrics = await other.get("/metrics")
    assert metric_value(metrics.text, "kgserve_requests_paced_total") == len(paced)


async def test_zero_is_no_bound(settings_factory: Any) -> None:
    app = create_app(settings_factory(limits={"max_requests_per_s_per_client": 0}))
    async with client_from(app, "10.0.0.1") as client:
        answers = await asyncio.gather(*(client.get("/healthz") for _ in range(3 * RATE)))
    assert not [answer for answer in answers if "x-paced-ms" in answer.headers]
