"""One flooding process of the message-flood attacks (issue 36): `--connections` WebSockets from one address, each
sending a small invalid line per message at its share of `--rate` messages a second for `--seconds`, and reading
every answer (so no send-buffer guard trips); with `--http`, keep-alive connections pipelining requests of that
line to /analysis instead. Prints one JSON line: messages written, answers read, the error
texts seen other than the invalid line's own (kgserve's notice when it bounds the flood), seconds.

``python -m benchmarks.hostile_attacks.flooder --port P --local 127.0.1.9 --rate 30000 --seconds 15``

Frames are built once (one mask for all: kgserve unmasks whatever the key), written in ticks of TICK_S; a tick
whose writes kgserve has not taken waits for them (TCP's backpressure: kgserve reads no faster than it wants),
so the rate written is what kgserve took, never more than asked. Answers are counted by their opening bytes,
without parsing each frame (at 60,000 a second that would cost a core of Python).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import struct
import sys
import time
from dataclasses import dataclass, field

from benchmarks.hostile_attacks.common import open_raw, raw_websocket, ws_frame

__all__ = ["ANSWER", "FLOOD_LINE", "FloodCounts", "flood", "frame_block", "read_answers"]

FLOOD_LINE = b"x"  # KataGo answers it with an error line without an id (a line it cannot parse)
# over HTTP: the same line as a request's body, pipelined on a keep-alive connection (answered 400 with that line)
FLOOD_REQUEST = b"POST /analysis HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n" + FLOOD_LINE
TICK_S = 0.005
ANSWER = b'{"error":'
HTTP_ANSWER = b"HTTP/1.1 "
PACED = b"\r\nx-paced-ms: "  # a response that waited its client's turn (kgserve.http.pacing)
_ERROR = re.compile(rb'"error":"((?:[^"\\]|\\.)*)"')
_MASK = b"\x1f\x2e\x3d\x4c"


def frame_block(payload: bytes, count: int) -> bytes:
    """`count` masked text frames of `payload` (under 126 bytes), back to back."""
    masked = bytes(byte ^ _MASK[index % 4] for index, byte in enumerate(payload))
    return (bytes([0x81, 0x80 | len(payload)]) + _MASK + masked) * count


@dataclass
class FloodCounts:
    written: int = 0
    answers: int = 0
    texts: dict[str, int] = field(default_factory=dict)  # error texts other than the invalid line's, and how often


async def read_answers(reader: asyncio.StreamReader, counts: FloodCounts, common: list[bytes], answer: bytes) -> None:
    """Count the answers (`answer`: how each begins) until the connection ends, and the error texts other than the
    first one seen (`common`: the invalid line's own)."""
    tail = b""
    with contextlib.suppress(ConnectionError):
        while chunk := await reader.read(1 << 18):
            window = tail + chunk
            counts.answers += window.count(answer) - tail.count(answer)
            if answer == HTTP_ANSWER and (paced := window.count(PACED) - tail.count(PACED)):
                counts.texts["(HTTP) X-Paced-Ms"] = counts.texts.get("(HTTP) X-Paced-Ms", 0) + paced
            for text in _ERROR.findall(chunk):
                if not common:
                    common.append(text)  # the first answer is the invalid line's own error
                elif text != common[0]:
                    key = text.decode("utf-8", errors="replace")
                    counts.texts[key] = counts.texts.get(key, 0) + 1
            tail = window[-(max(len(answer), len(PACED)) - 1) :]


async def _one(port: int, local: str, rate: float, seconds: float, counts: FloodCounts, http: bool) -> None:
    if http:
        reader, writer = await open_raw(port, local=local)
        block, answer = FLOOD_REQUEST, HTTP_ANSWER
    else:
        reader, writer = await raw_websocket(port, local)
        block, answer = frame_block(FLOOD_LINE, 1), ANSWER
    common: list[bytes] = []
    reading = asyncio.create_task(read_answers(reader, counts, common, answer))
    per_tick = max(1, round(rate * TICK_S))
    block *= per_tick
    began = time.monotonic()
    ticks = 0
    try:
        while (now := time.monotonic()) - began < seconds:
            writer.write(block)
            counts.written += per_tick
            ticks += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(writer.drain(), max(0.0, began + seconds - now))
            behind = began + ticks * TICK_S - time.monotonic()
            if behind > 0:
                await asyncio.sleep(behind)
    except ConnectionError:
        pass
    finally:
        if not http:
            with contextlib.suppress(Exception):
                writer.write(ws_frame(0x8, struct.pack("!H", 1000)))  # close, normal
        await asyncio.sleep(1.0)  # the answers still on their way
        reading.cancel()
        await asyncio.gather(reading, return_exceptions=True)
        writer.close()


async def flood(
    port: int, local: str, connections: int, rate: float, seconds: float, *, http: bool = False
) -> dict[str, object]:
    counts = FloodCounts()
    began = time.monotonic()
    await asyncio.gather(*(_one(port, local, rate / connections, seconds, counts, http) for _ in range(connections)))
    return {
        "written": counts.written,
        "answers": counts.answers,
        "texts": counts.texts,
        "seconds": seconds,
        "wall_s": time.monotonic() - began,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.hostile_attacks.flooder", description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--local", required=True, help="the attacker's address (127.0.1.x)")
    p.add_argument("--connections", type=int, default=1)
    p.add_argument("--rate", type=float, required=True, help="messages a second, all this process's connections")
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--http", action="store_true", help="requests to /analysis, pipelined, instead of WebSockets")
    args = p.parse_args(argv)
    result = asyncio.run(flood(args.port, args.local, args.connections, args.rate, args.seconds, http=args.http))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
