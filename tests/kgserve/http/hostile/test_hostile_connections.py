"""Hostile connections (issue 12, items 6 and 7, and the questionable cases decided as fixes): header
size, slowloris on headers and bodies, idle connections, log injection, HTTP/1.0, /readyz details.

Real uvicorn on 127.0.0.1 with kgserve's own uvicorn config (kgserve.cli.uvicorn_config), raw sockets;
the engine pool is scripted (tests/kgserve/http/conftest.py). Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from kgserve.app import create_app
from kgserve.cli import uvicorn_config
from kgserve.engine.errors import EngineDied, failure_text
from kgserve.http.openapi import build_openapi

QUERY = b'{"id":"q","moves":[],"rules":"chinese","komi":7.5,"boardXSize":9,"boardYSize":9,"maxVisits":10}'
TIGHT = {
    "header_timeout_s": 0.5,
    "body_timeout_s": 0.5,
    "keep_alive_timeout_s": 0.5,
    "max_header_bytes": 4096,
}


@asynccontextmanager
async def tight_server(
    settings_factory: Any, serve: Any, pool: Any, **server: Any
) -> AsyncIterator[tuple[str, int, Any]]:
    app = create_app(settings_factory(server={**TIGHT, **server}), pool_factory=lambda s: pool)
    async with serve(app) as url:
        yield url, int(url.rsplit(":", 1)[1]), app


async def exchange(port: int, *parts: bytes, pause_s: float = 0.0, limit_s: float = 10.0) -> tuple[bytes, bool]:
    """Send `parts` (pausing between them) while reading until the server closes: (what came, closed)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    received = bytearray()

    async def read_all() -> bool:
        try:
            while chunk := await reader.read(65536):
                received.extend(chunk)
        except ConnectionError:
            pass  # reset by the server: closed all the same
        return True

    reading = asyncio.create_task(read_all())
    try:
        for part in parts:
            writer.write(part)
            await writer.drain()
            await asyncio.sleep(pause_s)
    except ConnectionError:
        pass  # the server closed while we were still sending
    try:
        closed = await asyncio.wait_for(reading, limit_s)
    except TimeoutError:
        closed = False
    finally:
        writer.close()
    return bytes(received), closed


# -- item 7: header size, slowloris, idle connections --------------------------------------------------------
async def test_oversized_headers_are_refused_and_closed(settings_factory: Any, serve: Any, scripted_pool: Any) -> None:
    async with tight_server(settings_factory, serve, scripted_pool) as (_, port, _app):
        head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n"
        received, closed = await exchange(port, head)
        trickled, trickle_closed = await exchange(port, head[:3000], head[3000:6000], pause_s=0.05)
        # after a complete request on the same connection (pipelined): counted all the same
        pipelined, pipelined_closed = await exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + head)
    assert received.startswith(b"HTTP/1.1 400 ") and closed, received[:200]
    assert pipelined.startswith(b"HTTP/1.1 200 ") and b"HTTP/1.1 400 " in pipelined and pipelined_closed
    assert b"server.max_header_bytes" in received
    assert trickled.startswith(b"HTTP/1.1 400 ") and trickle_closed


async def test_incomplete_headers_and_silent_connections_are_closed(
    settings_factory: Any, serve: Any, scripted_pool: Any
) -> None:
    async with tight_server(settings_factory, serve, scripted_pool) as (_, port, _app):
        partial, partial_closed = await exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        silent, silent_closed = await exchange(port)
        slow, slow_closed = await exchange(port, *[bytes([c]) for c in b"GET /healthz HTTP/1.1\r\n"], pause_s=0.1)
    assert partial.startswith(b"HTTP/1.1 408 ") and partial_closed
    assert b"server.header_timeout_s" in partial
    assert silent == b"" and silent_closed
    assert slow.startswith(b"HTTP/1.1 408 ") and slow_closed


async def test_incomplete_body_gets_408(
    settings_factory: Any, serve: Any, scripted_pool: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kgserve.access")
    async with tight_server(settings_factory, serve, scripted_pool) as (url, port, app):
        head = b"POST /analysis HTTP/1.1\r\nHost: x\r\nX-Request-ID: slowbody\r\nContent-Length: 1000\r\n\r\n{"
        received, closed = await exchange(port, head)
        async with httpx.AsyncClient(base_url=url) as client:
            metrics = (await client.get("/metrics")).text
    assert received.startswith(b"HTTP/1.1 408 ") and closed, received[:200]
    documented = build_openapi(app.state.kgserve.settings)["paths"]["/analysis"]["post"]["responses"]["408"]
    assert received.endswith(documented["content"]["text/plain"]["example"].encode())
    assert any("id=slowbody" in r.message and "outcome=body_timeout" in r.message for r in caplog.records)
    assert scripted_pool.streams == []
    assert "kgserve_inflight_queries 0.0" in metrics


async def test_a_refused_body_is_let_go_with_its_connection(
    settings_factory: Any, serve: Any, scripted_pool: Any
) -> None:
    # refused on its Content-Length (413 + close), the request's body is never read: the bytes uvicorn received
    # for it must go with the connection, not wait in a reference cycle for the garbage collector (issue 27's
    # memory attack left ~15-19 MB of them behind)
    limits = {"memory_budget_bytes": 1 << 20, "memory_per_client_bytes": 1 << 20, "max_body_bytes": 4 << 20}
    app = create_app(settings_factory(limits=limits), pool_factory=lambda s: scripted_pool)
    seen: list[Any] = []
    base: Any = uvicorn_config(app, app.state.kgserve.settings).http

    class Watched(base):
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            seen.append(self)

    async with serve(app, protocol=Watched) as url:
        port = int(url.rsplit(":", 1)[1])
        head = b"POST /analysis HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n"
        received, closed = await exchange(port, head + b"x" * 60_000)
        async with asyncio.timeout(10):
            while seen[0].transport is not None and not seen[0].transport.is_closing():  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # connection_lost runs on the loop after the close
    assert received.startswith(b"HTTP/1.1 413 ") and closed, received[:200]
    assert b"limits.memory_per_client_bytes" in received
    assert seen[0].cycle is not None and len(seen[0].cycle.body) == 0


async def test_keep_alive_connection_idles_out_and_cannot_slowloris_the_next_request(
    settings_factory: Any, serve: Any, scripted_pool: Any
) -> None:
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    async with tight_server(settings_factory, serve, scripted_pool) as (_, port, _app):
        idle, idle_closed = await exchange(port, request)
        next_partial, partial_closed = await exchange(port, request, b"GET /heal", pause_s=0.1)
    assert idle.startswith(b"HTTP/1.1 200 ") and idle.count(b"HTTP/1.1") == 1 and idle_closed
    assert next_partial.count(b"HTTP/1.1 200 ") == 1 and b"HTTP/1.1 408 " in next_partial and partial_closed


# -- item 6: log injection --------------------------------------------------------------------------------------
async def test_client_values_cannot_forge_log_lines(
    settings_factory: Any, serve: Any, scripted_pool: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kgserve.access")
    forged = "/x%0Arequest%20id=FAKE%20POST%20/analysis%20status=200%20outcome=ok"
    async with (
        tight_server(settings_factory, serve, scripted_pool) as (url, _, _app),
        httpx.AsyncClient(base_url=url) as client,
    ):
        await client.get(forged)
        await client.get("/x%20status=200%20outcome=ok")
        unsafe = await client.get("/healthz", headers={"X-Request-ID": "a b=c"})
        long = await client.get("/healthz", headers={"X-Request-ID": "x" * 129})
        fine = await client.get("/healthz", headers={"X-Request-ID": "job-7.step_2:a"})
    lines = [r.getMessage() for r in caplog.records if r.name == "kgserve.access"]
    assert len(lines) == 5
    for line in lines:
        assert "\n" not in line and "\r" not in line
        assert len(re.findall(r"(?:^| )status=", line)) == 1 and len(re.findall(r" outcome=", line)) == 1, line
    assert not any("id=FAKE" in line.split(" ", 2)[1] for line in lines)
    assert re.fullmatch(r"[0-9a-f]{32}", unsafe.headers["x-request-id"])
    assert re.fullmatch(r"[0-9a-f]{32}", long.headers["x-request-id"])
    assert fine.headers["x-request-id"] == "job-7.step_2:a"


# -- decided as fixes: HTTP/1.0 framing, no Host-header redirects, /readyz details, not_ready outcome ---------
async def test_http10_response_is_not_chunked(settings_factory: Any, serve: Any, scripted_pool: Any) -> None:
    async with tight_server(settings_factory, serve, scripted_pool) as (_, port, _app):
        request = b"POST /analysis HTTP/1.0\r\nContent-Length: %d\r\n\r\n%s" % (len(QUERY), QUERY)
        received, closed = await exchange(port, request)
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and closed
    assert b"chunked" not in head.lower()
    assert json.loads(body) == {"id": "q", "isDuringSearch": False, "turnNumber": 0}


async def test_trailing_slash_is_not_redirected_to_the_host_header(
    settings_factory: Any, serve: Any, scripted_pool: Any
) -> None:
    async with (
        tight_server(settings_factory, serve, scripted_pool) as (url, _, _app),
        httpx.AsyncClient(base_url=url) as client,
    ):
        post = await client.post("/analysis/", content=QUERY, headers={"Host": "evil.example"})
        get = await client.get("/metrics/", headers={"Host": "evil.example"})
    assert post.status_code == 404 and get.status_code == 404
    assert "location" not in post.headers and "location" not in get.headers


async def test_readyz_shows_stderr_only_with_the_token(
    settings_factory: Any, serve: Any, scripted_pool: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KGTEST_HOSTILE_TOKEN", "s3cret")
    scripted_pool.ready = False
    async with (
        tight_server(settings_factory, serve, scripted_pool, auth_token_env="KGTEST_HOSTILE_TOKEN") as (
            url,
            _,
            _app,
        ),
        httpx.AsyncClient(base_url=url) as client,
    ):
        anonymous = await client.get("/readyz")
        operator = await client.get("/readyz", headers={"Authorization": "Bearer s3cret"})
        metrics = (await client.get("/metrics", headers={"Authorization": "Bearer s3cret"})).text
    assert anonymous.status_code == operator.status_code == 503
    assert all("last_stderr" not in engine for engine in anonymous.json()["engines"])
    assert all("last_stderr" in engine for engine in operator.json()["engines"])
    assert 'kgserve_requests_total{outcome="not_ready"} 2.0' in metrics
    assert 'outcome="unavailable"' not in metrics


def test_engine_died_line_carries_no_stderr() -> None:
    died = EngineDied("engine[0] exited (killed by signal 9); last stderr: query from bob: SECRET", exit_code=-9)
    text = failure_text(died)
    assert "SECRET" not in text and "bob" not in text
    assert text == "engine died before finishing this query: killed by signal 9"
