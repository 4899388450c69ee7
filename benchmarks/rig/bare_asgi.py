"""The bare stack kgserve is built on, as a yardstick: Starlette on uvicorn (httptools), one POST route.

``python -m benchmarks.rig.bare_asgi --bytes N`` binds a free loopback port, prints ``listening PORT`` on
stdout and answers every ``POST /analysis`` with one ndjson line of N bytes (newline included) after reading
the body: the least a server of this stack can do for a query. benchmarks.hotpath measures kgserve
against it with the same client.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

__all__ = ["build_app", "ndjson_line"]


def ndjson_line(size: int) -> bytes:
    """A JSON line of exactly ``size`` bytes (at least 32), shaped like an analysis answer."""
    head = b'{"id":"bare","isDuringSearch":false,"pad":"'
    tail = b'"}\n'
    return head + b"x" * max(0, size - len(head) - len(tail)) + tail


def build_app(size: int) -> Starlette:
    line = ndjson_line(size)

    async def analysis(request: Request) -> Response:
        await request.body()
        return Response(line, media_type="application/x-ndjson")

    return Starlette(routes=[Route("/analysis", analysis, methods=["POST"])])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rig.bare_asgi", description=__doc__.split("\n")[0])
    parser.add_argument("--bytes", type=int, default=1024, help="response line size, newline included")
    size = parser.parse_args(argv).bytes
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    # uvicorn's defaults otherwise (its event loop choice, proxy headers on), with no access log
    config = uvicorn.Config(build_app(size), http="httptools", log_config=None, access_log=False, lifespan="off")
    print(f"listening {sock.getsockname()[1]}", flush=True)
    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
        runner.run(uvicorn.Server(config).serve(sockets=[sock]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
