"""A kgserve URL as the batch command's target: rows POSTed to /analysis a group per request (JSON lines, as
kgserve takes them), on one aiohttp session.

How much at once (`plan`, from /readyz): queries in flight 2 x analysis threads x engines, within kgserve's
limits on queries in flight (all clients, and per client); connections at most half of kgserve's per-client cap
(kgserve closes the rest with 429, and the user may run other tools from this address), so the queries in
flight are spread over them in groups of up to max_queries_per_request.

How it treats kgserve's answers (docs/http-api.md):
- 200 and 400: the body holds each query's lines, by id (400: KataGo or kgserve refused every query: answers
  for good); a query kgserve cut short (its engine died, kgserve shut down) or missing from the body is tried
  again; with X-Deadline-Exceeded every query of the request is tried again.
- 429, 5xx and connection errors (refused, reset: a kgserve restarting): the whole group is tried again after
  the server's Retry-After or an exponential back-off with jitter.
- 401/403: no row can be answered with these credentials: the run stops (`TargetFailed`), its journal kept.
- Anything else (413 ...): an answer for good for each row, an error line naming the status.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp

from kgserve.batch.answers import Answer, Backoff, RetryLater, answer_of
from kgserve.batch.inputs import Row
from kgserve.batch.plan import Plan, TargetFailed
from kgserve.katago.protocol import error_line, locate_id

__all__ = ["DEFAULT_CONCURRENCY", "HttpTarget", "plan_from_readyz"]

DEFAULT_CONCURRENCY = 16  # when /readyz does not say how many analysis threads there are
DEFAULT_CONNECTIONS = 32  # half of kgserve's shipped max_connections_per_client
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


def plan_from_readyz(readyz: Mapping[str, Any], concurrency: int | None = None) -> Plan:
    """Queries in flight (2 x threads x engines unless given, within kgserve's limits), over how many connections."""
    found = readyz.get("client_limits")
    limits: Mapping[str, Any] = found if isinstance(found, dict) else {}
    threads = readyz.get("analysis_threads")
    engines = len(readyz.get("engines") or []) or 1
    if concurrency is not None:
        wanted, why = concurrency, "--concurrency"
    elif isinstance(threads, int) and threads > 0:
        wanted, why = 2 * threads * engines, f"2 x {threads} analysis threads x {engines} engine(s), from /readyz"
    else:
        wanted, why = DEFAULT_CONCURRENCY, "the default: /readyz names no analysis_threads"
    caps = [limits.get(key) for key in ("max_inflight_queries", "max_inflight_per_client")]
    cap = min((c for c in caps if isinstance(c, int) and c > 0), default=wanted)
    if cap < wanted:
        wanted, why = cap, f"kgserve's limit on queries in flight ({why}: {wanted})"
    per_client = limits.get("max_connections_per_client")
    connections = max(1, per_client // 2) if isinstance(per_client, int) and per_client > 0 else DEFAULT_CONNECTIONS
    per_request = limits.get("max_queries_per_request")
    group = math.ceil(wanted / connections)
    if isinstance(per_request, int) and per_request > 0:
        group = min(group, per_request)
    return Plan(wanted, group, why)


def _retry_after(headers: Any) -> float | None:
    value = headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back on the back-off


def _id_key(caller_id: str | None) -> bytes:
    # how kgserve writes a caller's id back into each line (kgserve.katago.protocol.Query.caller_id_json)
    return json.dumps(caller_id, ensure_ascii=False).encode()


def _by_id(body: bytes) -> dict[bytes, list[bytes]]:
    """The response's lines by the JSON-encoded id they carry (lines with no id under b'')."""
    lines: dict[bytes, list[bytes]] = {}
    for line in body.split(b"\n"):
        if line.strip():
            span = locate_id(line)
            key = line[span[0] - 1 : span[1] + 1] if span is not None else b""
            lines.setdefault(key, []).append(line)
    return lines


def _row_result(row: Row, lines: list[bytes]) -> Answer | RetryLater:
    if not lines:
        return RetryLater("kgserve's answer held no line for this query")
    try:
        return answer_of(lines, row.finals)
    except RetryLater as exc:
        return exc


class HttpTarget:
    def __init__(self, url: str, *, token_env: str | None = None) -> None:
        self.url = url.rstrip("/")
        token = os.environ.get(token_env) if token_env else None
        self.headers = {"Content-Type": "application/json", "X-Priority-Class": "batch"}
        if token:
            self.headers["Authorization"] = f"Bearer {token.split(',')[0].strip()}"
        self._session: aiohttp.ClientSession | None = None

    def describe(self) -> str:
        return self.url

    async def open(self) -> None:
        # no pool limit: the plan bounds the connections; no total timeout: a deep search may take minutes
        # (kgserve's deadline_s bounds it); connecting is bounded
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout)

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "open() first"
        return self._session

    async def plan(self, concurrency: int | None) -> Plan:
        """From /readyz, asked a few times while kgserve does not answer (restarting; once when --concurrency is
        given: only the connections are left to size); then the defaults (the rows wait for kgserve anyway)."""
        backoff = Backoff(base_s=0.5, cap_s=8.0)
        attempts = 1 if concurrency is not None else 8
        problem = "no answer"
        for attempt in range(attempts):
            try:
                async with self.session.get(self.url + "/readyz", headers=self.headers) as resp:
                    readyz = await resp.json(content_type=None)
            except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
                problem = type(exc).__name__
                await asyncio.sleep(backoff.delay(attempt) if attempt + 1 < attempts else 0)
                continue
            if isinstance(readyz, dict):
                return plan_from_readyz(readyz, concurrency)
            problem = "not a JSON object"
            break
        plan = plan_from_readyz({}, concurrency)
        return Plan(plan.concurrency, plan.group, f"{plan.why}; /readyz did not answer ({problem})")

    async def send_group(self, rows: Sequence[Row]) -> list[Answer | RetryLater]:
        body = b"\n".join(row.line or b"" for row in rows)
        try:
            async with self.session.post(self.url + "/analysis", data=body, headers=self.headers) as resp:
                answer = await resp.read()
                status, headers = resp.status, resp.headers
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            return [RetryLater(f"connection: {type(exc).__name__}: {exc}")] * len(rows)
        if status in (401, 403):
            raise TargetFailed(f"{self.url} answered HTTP {status}: {answer[:200].decode('utf-8', 'replace')}")
        if status in _RETRY_STATUS:
            return [RetryLater(f"HTTP {status}", _retry_after(headers))] * len(rows)
        if status not in (200, 400):
            text = f"kgserve answered HTTP {status}: {answer[:200].decode('utf-8', 'replace').strip()}"
            return [Answer((error_line(text, caller_id=row.caller_id),), f"HTTP {status}") for row in rows]
        if headers.get("X-Deadline-Exceeded") == "true":
            return [RetryLater("kgserve's deadline passed before the search ended")] * len(rows)
        lines = _by_id(answer)
        return [_row_result(row, lines.get(_id_key(row.caller_id), [])) for row in rows]

    async def close(self) -> float | None:
        if self._session is not None:
            await self._session.close()
        return None  # NN rows: not reported over HTTP
