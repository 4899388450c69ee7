"""A client pipelining thousands of small requests on one keep-alive connection (issue 36): kgserve.http.httpguard
parses a pipelined request only once the one before it is answered, so a few wait parsed at most, whatever the
client sends; every request is still answered, in order. In-process uvicorn with kgserve's guarded protocol (a
subclass that counts the requests parsed ahead), a raw socket."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kgserve.app import create_app
from kgserve.http.httpguard import FEED_BYTES, ConnectionLimits, guarded_protocol

pytestmark = pytest.mark.slow

REQUESTS = 3_000
REQUEST = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"  # 35 bytes
# parsed ahead of the one in progress: what one FEED_BYTES chunk holds, at most (uvicorn: a whole read, and again
# after each response)
AHEAD = FEED_BYTES // len(REQUEST) + 1


def _counting_protocol(settings: Any, ahead: list[int]) -> type[asyncio.Protocol]:
    base: Any = guarded_protocol(ConnectionLimits.from_settings(settings.server))

    class Counting(base):
        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            ahead.append(len(self.pipeline))

    return Counting


async def test_pipelined_requests_are_parsed_one_answer_at_a_time_and_all_answered(
    settings_factory: Any, serve: Any, scripted_pool: Any
) -> None:
    settings = settings_factory(limits={"max_requests_per_s_per_client": 0})  # pipelining alone, not the pace
    ahead: list[int] = []
    app = create_app(settings, pool_factory=lambda s: scripted_pool)
    async with serve(app, protocol=_counting_protocol(settings, ahead)) as url:
        reader, writer = await asyncio.open_connection("127.0.0.1", int(url.rsplit(":", 1)[1]))
        writer.write(REQUEST * REQUESTS)  # 105 KB at once: one or two socket reads
        answered = b""
        async with asyncio.timeout(60):
            while answered.count(b"HTTP/1.1 200 ") < REQUESTS:
                chunk = await reader.read(1 << 16)
                assert chunk, "connection closed"
                answered += chunk
        writer.close()
    assert answered.count(b"HTTP/1.1 ") == REQUESTS  # each answered once, 200
    assert len(ahead) == REQUESTS and max(ahead) <= AHEAD  # uvicorn alone: ~2,900 parsed ahead at once
