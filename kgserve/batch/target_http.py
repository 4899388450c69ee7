"""A kgserve URL as the batch command's target: one POST /analysis per row, on one aiohttp session.

How it treats kgserve's answers (docs/http-api.md):
- 200 and 400: the body holds the row's lines (400: KataGo or kgserve refused the query, an answer for good);
  a query kgserve cut short (its engine died, kgserve shut down, the deadline passed) is tried again.
- 429, 5xx and connection errors (refused, reset: a kgserve restarting): tried again after the server's
  Retry-After or an exponential back-off with jitter.
- 401/403: no row can be answered with these credentials: the run stops (`TargetFailed`), its journal kept.
- Anything else (413 ...): an answer for good, an error line naming the status.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import aiohttp

from kgserve.batch.answers import Answer, Backoff, RetryLater, answer_of
from kgserve.batch.inputs import Row
from kgserve.katago.protocol import error_line

__all__ = ["DEFAULT_CONCURRENCY", "HttpTarget", "TargetFailed", "concurrency_from_readyz"]

DEFAULT_CONCURRENCY = 16  # when /readyz does not say how many analysis threads there are
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


class TargetFailed(Exception):
    """The target cannot answer any row (bad credentials, an engine that does not start); the run stops."""


def concurrency_from_readyz(readyz: dict[str, Any]) -> tuple[int, str]:
    """Rows in flight to keep every analysis thread busy with one more waiting for each: 2 x threads x engines,
    within kgserve's limit on queries in flight; and how that was found."""
    threads = readyz.get("analysis_threads")
    engines = len(readyz.get("engines") or []) or 1
    if not isinstance(threads, int) or threads < 1:
        return DEFAULT_CONCURRENCY, "the default: /readyz names no analysis_threads"
    wanted, why = 2 * threads * engines, f"2 x {threads} analysis threads x {engines} engine(s), from /readyz"
    limit = readyz.get("max_inflight_queries")
    if isinstance(limit, int) and 0 < limit < wanted:
        return limit, f"kgserve's max_inflight_queries ({why}: {wanted})"
    return wanted, why


def _retry_after(headers: Any) -> float | None:
    value = headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back on the back-off


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
        # no pool limit: the command's own concurrency bounds the connections; no total timeout: a deep search
        # may take minutes (kgserve's deadline_s bounds it); connecting is bounded
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout)

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "open() first"
        return self._session

    async def concurrency(self, attempts: int = 8) -> tuple[int, str]:
        """From /readyz, asked a few times while kgserve does not answer (restarting); then the default (the rows
        wait for kgserve anyway)."""
        backoff = Backoff(base_s=0.5, cap_s=8.0)
        for attempt in range(attempts):
            try:
                async with self.session.get(self.url + "/readyz", headers=self.headers) as resp:
                    readyz = await resp.json(content_type=None)
            except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
                problem = type(exc).__name__
                await asyncio.sleep(backoff.delay(attempt) if attempt + 1 < attempts else 0)
                continue
            if isinstance(readyz, dict):
                return concurrency_from_readyz(readyz)
            return DEFAULT_CONCURRENCY, "the default: /readyz is not a JSON object"
        return DEFAULT_CONCURRENCY, f"the default: /readyz did not answer ({problem})"

    async def send(self, row: Row) -> Answer:
        assert row.line is not None
        try:
            async with self.session.post(self.url + "/analysis", data=row.line, headers=self.headers) as resp:
                body = await resp.read()
                status, headers = resp.status, resp.headers
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise RetryLater(f"connection: {type(exc).__name__}: {exc}") from None
        if status in (401, 403):
            raise TargetFailed(f"{self.url} answered HTTP {status}: {body[:200].decode('utf-8', 'replace')}")
        if status in _RETRY_STATUS:
            raise RetryLater(f"HTTP {status}", _retry_after(headers))
        if status not in (200, 400):
            text = f"kgserve answered HTTP {status}: {body[:200].decode('utf-8', 'replace').strip()}"
            return Answer((error_line(text, caller_id=row.caller_id),), f"HTTP {status}")
        if headers.get("X-Deadline-Exceeded") == "true":
            raise RetryLater("kgserve's deadline passed before the search ended")
        return answer_of([line for line in body.split(b"\n") if line.strip()], row.finals)

    async def close(self) -> float | None:
        if self._session is not None:
            await self._session.close()
        return None  # NN rows: not reported over HTTP
