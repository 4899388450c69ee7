"""A response complete at once goes out in one socket write (kgserve.http.heldwrites), against the installed
uvicorn; a streamed one still goes out as it comes; and holding falls back to nothing where it cannot work."""

from __future__ import annotations

import asyncio
import gc
import json
from typing import Any

import httpx
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from kgserve.app import create_app
from kgserve.http.heldwrites import HeldWrites, hold_writes
from kgserve.http.httpguard import ConnectionLimits, guarded_protocol
from tests.conftest import analysis_query


class _Recorder:
    """A transport that records what is written to it (and passes everything on)."""

    def __init__(self, transport: Any, writes: list[bytes]) -> None:
        self._transport = transport
        self._writes = writes

    def write(self, data: bytes) -> None:
        self._writes.append(bytes(data))
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _recording_protocol(settings: Any, writes: list[bytes]) -> type[asyncio.Protocol]:
    base: Any = guarded_protocol(ConnectionLimits.from_settings(settings.server))

    class Recording(base):
        def connection_made(self, transport: Any) -> None:
            super().connection_made(_Recorder(transport, writes))

    return Recording


async def test_a_whole_response_is_one_write_and_a_streamed_one_goes_out_as_it_comes(
    settings_factory: Any, serve: Any, scripted_pool: Any
) -> None:
    settings = settings_factory()
    writes: list[bytes] = []
    app = create_app(settings, pool_factory=lambda s: scripted_pool)
    whole = analysis_query("whole", size=9, max_visits=5)
    streamed = analysis_query("streamed", size=9, max_visits=200) | {"reportDuringSearchEvery": 0.1}
    async with (
        serve(app, protocol=_recording_protocol(settings, writes)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        response = await client.post("/analysis", json=whole)
        assert response.status_code == 200 and response.content.count(b"\n") == 1
        (write,) = writes  # head and body together
        assert write.startswith(b"HTTP/1.1 200 ") and write.endswith(response.content)
        assert b"content-length: %d" % len(response.content) in write.lower()
        writes.clear()
        response = await client.post("/analysis", json=streamed)
    assert response.status_code == 200 and response.content.count(b"\n") == 2
    # chunked: the status line goes out with the partial line, before the search is over (the final line
    # comes ~0.2 s later and is not asserted on: how writes group then is the scheduler's business)
    assert writes[0].startswith(b"HTTP/1.1 200 ") and b"transfer-encoding: chunked" in writes[0]
    assert b'"isDuringSearch":true' in writes[0]
    assert b"".join(writes).endswith(b"0\r\n\r\n")


class _Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.extra = {"peername": ("127.0.0.1", 1)}

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str) -> Any:
        return self.extra.get(name)


class _Cycle:
    def __init__(self, transport: Any) -> None:
        self.transport = transport


def test_held_writes_go_out_joined_then_the_close() -> None:
    transport: Any = _Transport()
    cycle = _Cycle(transport)
    held = hold_writes(cycle, transport)
    assert isinstance(held, HeldWrites) and cycle.transport is held
    cycle.transport.write(b"head ")
    cycle.transport.write(b"body")
    cycle.transport.close()
    assert cycle.transport.get_extra_info("peername") == ("127.0.0.1", 1)  # the rest is the transport's
    assert transport.writes == [] and not transport.closed
    held.release()
    assert cycle.transport is transport and transport.writes == [b"head body"] and transport.closed


def test_nothing_is_held_where_it_cannot_work() -> None:
    transport: Any = _Transport()
    assert hold_writes(_Cycle(object()), transport) is None  # a cycle that writes elsewhere
    assert hold_writes(object(), transport) is None  # a cycle without a transport attribute
    transport.closed = True
    cycle = _Cycle(transport)
    assert hold_writes(cycle, transport) is None and cycle.transport is transport


async def _post(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, body: bytes) -> int:
    """One POST /analysis on a kept-alive connection (a bare client: no garbage of its own); the status."""
    writer.write(b"POST /analysis HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    await reader.readexactly(length)
    return int(head.split(b" ")[1])


def _request_garbage(port: int) -> list[object]:
    """What the collector finds of this server's requests: their uvicorn cycles, scopes and held writes (other
    garbage, e.g. an earlier test's server going away meanwhile, is not theirs)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found: list[object] = []
        for item in gc.garbage:
            scope = item.scope if isinstance(item, RequestResponseCycle) else item
            if isinstance(item, HeldWrites) or (
                isinstance(scope, dict)
                and scope.get("type") == "http"
                and (scope.get("server") or (None, 0))[1] == port
            ):
                found.append(item)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    return found


async def test_requests_leave_nothing_for_the_garbage_collector(
    settings_factory: Any, serve: Any, scripted_pool: Any
) -> None:
    # a request's objects must go by reference counting: a cycle through them (e.g. the scope's extension
    # referring to its own request cycle) leaves them all to the collector, ~13 µs a request measured
    app = create_app(settings_factory(), pool_factory=lambda s: scripted_pool)
    body = json.dumps(analysis_query("gc", size=9, max_visits=1)).encode()
    async with serve(app) as url:
        port = int(url.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            assert await _post(reader, writer, body) == 200  # first-use caches
            gc.collect()
            gc.disable()
            try:
                for _ in range(20):
                    assert await _post(reader, writer, body) == 200
                left = _request_garbage(port)
            finally:
                gc.enable()
        finally:
            writer.close()
    assert left == [], f"{len(left)} objects of requests in reference cycles, e.g. {left[:3]!r}"
