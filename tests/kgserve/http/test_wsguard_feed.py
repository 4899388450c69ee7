"""kgserve.ws.wsguard parses what a WebSocket client sent a turn of the event loop at a time (issue 36): one socket
read of thousands of small messages is not parsed and handed to the app in one callback, and nothing more is parsed
while the app has not taken what was. The guard's protocol on a transport that records what it is asked, with a
plain ASGI app; no server, no sockets."""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from uvicorn.server import ServerState

from benchmarks.hostile_attacks.common import ws_frame
from kgserve.ws.wsguard import BYTES_PER_TURN, FRAMES_PER_TURN, guarded_websocket

HANDSHAKE = (
    b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)
MESSAGES = 10_000
# a turn parses up to FRAMES_PER_TURN frames, plus what the last chunk of FEED_BYTES (1,024) held: 7-byte frames
MOST_IN_A_TURN = FRAMES_PER_TURN + 1024 // 7 + 1


class Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.reading = True
        self.closing = False
        self.written = bytearray()

    def write(self, data: Any) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 9100)}.get(name, default)


def protocol(app: Any) -> tuple[Any, Transport]:
    config = uvicorn.Config(app, log_config=None, proxy_headers=False, ws_per_message_deflate=False)
    config.load()
    guard = guarded_websocket(30.0)(config=config, server_state=ServerState(), app_state={})
    transport = Transport()
    guard.connection_made(transport)
    return guard, transport


async def test_a_read_of_ten_thousand_messages_reaches_the_app_a_turn_at_a_time() -> None:
    taken: list[str] = []
    reading = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        await reading.wait()
        while len(taken) < MESSAGES:
            message = await receive()
            assert message["type"] == "websocket.receive", message
            taken.append(message["text"])

    guard, transport = protocol(app)
    guard.data_received(HANDSHAKE + ws_frame(0x1, b"x") * MESSAGES)  # one socket read, 70 KB
    assert guard.queue.qsize() <= MOST_IN_A_TURN  # uvicorn alone queued all 10,000 here
    assert not transport.reading  # the rest waits, unparsed; nothing more is read from the socket meanwhile
    for _ in range(20):  # the app has not read: nothing more is parsed, however many turns go by
        await asyncio.sleep(0)
    assert guard.queue.qsize() <= MOST_IN_A_TURN + 1
    reading.set()
    most = 0
    for _ in range(10 * MESSAGES):
        before = len(taken) + guard.queue.qsize()
        await asyncio.sleep(0)
        most = max(most, len(taken) + guard.queue.qsize() - before)
        if len(taken) == MESSAGES:
            break
    assert len(taken) == MESSAGES and set(taken) == {"x"}  # every message, in one piece
    assert most <= MOST_IN_A_TURN  # never more than a turn's share parsed between two turns
    assert transport.reading  # all parsed: the socket is read again


async def test_a_big_message_takes_a_few_turns_and_arrives_whole() -> None:
    got: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "websocket.accept"})
        got.append((await receive())["text"])

    guard, _ = protocol(app)
    payload = b"y" * (4 * BYTES_PER_TURN)
    guard.data_received(HANDSHAKE + ws_frame(0x1, payload))
    assert not got and guard.queue.qsize() <= 1  # a quarter of it parsed in the first turn
    for _ in range(20):
        await asyncio.sleep(0)
    assert got == [payload.decode()]
