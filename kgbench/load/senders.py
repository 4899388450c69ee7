"""How one request reaches its target: ``HttpSender`` (POST /analysis to kgserve) and ``DirectSender`` (straight
into kgserve's EnginePool, no HTTP: transport=direct). Both return an ``Outcome`` with the same status codes.

Both read the response line by line as it streams (kgbench.load.turns.TurnTally): each analysed turn is counted
when its final line arrives (``on_turn``), so a whole-game review is measured turn by turn, not only when its
last turn is done; the outcome checks that every turn asked for was answered once.

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

from kgbench.load.responses import Outcome, error_kind_for_status
from kgbench.load.turns import TurnCallback, TurnTally, expected_turns
from kgbench.load.types import HttpTarget
from kgserve.engine.client import EngineClient
from kgserve.engine.errors import EngineError
from kgserve.katago.protocol import Rejected, classify_line

__all__ = ["DirectSender", "HttpSender", "Sender"]


class Sender(Protocol):
    async def send(self, req_id: str, body: dict[str, Any], on_turn: TurnCallback | None = None) -> Outcome: ...


def _failed(tally: TurnTally, status: int, nbytes: int, kind: str) -> Outcome:
    """A request that failed: the turns it got answered before still count (their visits were spent)."""
    visits = sum(tally.visits.values()) if tally.visits else None
    return Outcome(status, nbytes, visits, kind, tally.turns, tally.partials)


class HttpSender:
    """POST /analysis over one shared ClientSession, the response read as it streams."""

    def __init__(self, session: aiohttp.ClientSession, target: HttpTarget, timeout_s: float) -> None:
        self.session = session
        self.url = target.base_url.rstrip("/") + "/analysis"
        self.headers = {"Content-Type": "application/json", **dict(target.headers)}
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def send(self, req_id: str, body: dict[str, Any], on_turn: TurnCallback | None = None) -> Outcome:
        data = json.dumps({"id": req_id, **body}, separators=(",", ":")).encode()
        tally = TurnTally(expected_turns(body), on_turn)
        nbytes = 0
        try:
            async with self.session.post(self.url, data=data, headers=self.headers, timeout=self.timeout) as resp:
                if (kind := error_kind_for_status(resp.status)) is not None:
                    return Outcome(resp.status, len(await resp.read()), None, kind)
                async for chunk in resp.content.iter_any():
                    nbytes += len(chunk)
                    tally.feed_chunk(chunk)
                tally.close()
                return tally.outcome(resp.status, nbytes)
        except TimeoutError:
            return _failed(tally, 0, nbytes, "timeout")
        except aiohttp.ClientConnectorError:
            return _failed(tally, 0, nbytes, "connect")
        except aiohttp.ClientError:
            return _failed(tally, 0, nbytes, "disconnect")


class DirectSender:
    """Sender over a started EnginePool (or any kgserve EngineClient), as one client, `client` (the key kgserve's
    front end would give the load generator's queries): the engine's thread reserve (kgserve.engine.dispatch)
    treats them as it treats one HTTP client's, so a direct figure has the served engine settings in it."""

    def __init__(self, pool: EngineClient, timeout_s: float, client: str = "kgbench") -> None:
        self.pool = pool
        self.timeout_s = timeout_s
        self.client = client

    async def send(self, req_id: str, body: dict[str, Any], on_turn: TurnCallback | None = None) -> Outcome:
        line = json.dumps({"id": req_id, **body}, separators=(",", ":")).encode()
        query = classify_line(line)
        if isinstance(query, Rejected):
            return Outcome(400, len(query.error_line) + 1, None, "client_error")
        try:
            stream = self.pool.submit(query, self.client)
        except EngineError:
            return Outcome(503, 0, None, "unavailable")
        tally = TurnTally(expected_turns(body), on_turn)
        nbytes = 0
        try:
            async with asyncio.timeout(self.timeout_s):
                async for item in stream:
                    nbytes += len(item) + 1
                    tally.feed(item)
        except TimeoutError:
            with contextlib.suppress(Exception):
                self.pool.abort(stream)
            return _failed(tally, 0, nbytes, "timeout")
        except EngineError:
            return _failed(tally, 503, nbytes, "unavailable")
        except asyncio.CancelledError:  # the level's drain ended: stop the engine's work on it too
            with contextlib.suppress(Exception):
                self.pool.abort(stream)
            raise
        return tally.outcome(200, nbytes)
