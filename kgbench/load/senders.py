"""How one request reaches its target: ``HttpSender`` (POST /analysis to kgserve) and ``DirectSender`` (straight
into kgserve's EnginePool, no HTTP: transport=direct). Both return an ``Outcome`` with the same status codes.

``DirectSender`` does what kgserve's intake does for one query (encode the JSON, ``classify_line``), then
``pool.submit(query, client)`` and reads the QueryStream to its end. Status codes mirror kgserve's: 200 answered,
400 rejected by the protocol, 503 no engine ready / engine died.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any, Protocol

import aiohttp

from kgbench.load.responses import Outcome, final_visits, outcome_from_response
from kgbench.load.types import HttpTarget
from kgserve.engine.client import EngineClient
from kgserve.engine.errors import EngineError
from kgserve.katago.protocol import Rejected, classify_line

__all__ = ["DirectSender", "HttpSender", "Sender"]


class Sender(Protocol):
    async def send(self, req_id: str, body: dict[str, Any]) -> Outcome: ...


class HttpSender:
    """POST /analysis over one shared ClientSession."""

    def __init__(self, session: aiohttp.ClientSession, target: HttpTarget, timeout_s: float) -> None:
        self.session = session
        self.url = target.base_url.rstrip("/") + "/analysis"
        self.headers = {"Content-Type": "application/json", **dict(target.headers)}
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def send(self, req_id: str, body: dict[str, Any]) -> Outcome:
        data = json.dumps({"id": req_id, **body}, separators=(",", ":")).encode()
        try:
            async with self.session.post(self.url, data=data, headers=self.headers, timeout=self.timeout) as resp:
                payload = await resp.read()
                return outcome_from_response(resp.status, payload)
        except TimeoutError:
            return Outcome(0, 0, None, "timeout")
        except aiohttp.ClientConnectorError:
            return Outcome(0, 0, None, "connect")
        except aiohttp.ClientError:
            return Outcome(0, 0, None, "disconnect")


class DirectSender:
    """Sender over a started EnginePool (or any kgserve EngineClient), as one client, `client` (the key kgserve's
    front end would give the load generator's queries): the engine's thread reserve (kgserve.engine.dispatch)
    treats them as it treats one HTTP client's, so a direct figure has the served engine settings in it."""

    def __init__(self, pool: EngineClient, timeout_s: float, client: str = "kgbench") -> None:
        self.pool = pool
        self.timeout_s = timeout_s
        self.client = client

    async def send(self, req_id: str, body: dict[str, Any]) -> Outcome:
        line = json.dumps({"id": req_id, **body}, separators=(",", ":")).encode()
        query = classify_line(line)
        if isinstance(query, Rejected):
            return Outcome(400, len(query.error_line) + 1, None, "client_error")
        try:
            stream = self.pool.submit(query, self.client)
        except EngineError:
            return Outcome(503, 0, None, "unavailable")
        lines: list[bytes] = []
        try:
            async with asyncio.timeout(self.timeout_s):
                async for item in stream:
                    lines.append(item)
        except TimeoutError:
            with contextlib.suppress(Exception):
                self.pool.abort(stream)
            return Outcome(0, sum(len(x) + 1 for x in lines), None, "timeout")
        except EngineError:
            return Outcome(503, sum(len(x) + 1 for x in lines), None, "unavailable")
        visits, kind = final_visits(lines)
        return Outcome(200, sum(len(x) + 1 for x in lines), visits, kind)
