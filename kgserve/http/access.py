"""The ASGI middleware every request passes: request id, bearer-token check, one log line, metrics.

- `X-Request-ID`: a client's value is kept when it is 1 to 128 of `A-Z a-z 0-9 . _ : -` and returned;
  otherwise kgserve makes one. Routes find it in `request.state.request_id`.
- Auth (see kgserve.auth): 401 with `WWW-Authenticate: Bearer` before the route runs; the credential a request
  presented (when any is configured) is in `state["credential"]`, for the per-client caps.
- Pace (kgserve.http.pacing): a request past its client's `limits.max_requests_per_s_per_client` while other
  clients have requests in progress waits its turn before the route runs; its response then carries `X-Paced-Ms`,
  its log line `paced_ms`.
- One log line per request, at its very end (after the last body byte, or the disconnect):
  `request id=... POST /analysis status=200 outcome=ok latency_ms=... [queries=N] [detail=...]`.
  The route may set `request.state.outcome` (e.g. deadline, disconnect, engine_died) and `.log_extra`;
  otherwise the outcome follows from the status code. Every client-supplied value in the line (path,
  method, extras) is percent-encoded outside a safe set, so no client can end the line or forge a field.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from typing import Any
from urllib.parse import quote

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kgserve.auth import TokenAuth
from kgserve.http.pacing import PACED_HEADER, RequestPacer
from kgserve.logformat import write_access_line
from kgserve.metrics import Metrics

__all__ = ["AccessMiddleware", "log_safe", "outcome_for_status", "request_id"]

_OUTCOMES = {
    200: "ok",
    400: "rejected",
    401: "unauthorized",
    404: "not_found",
    405: "bad_method",
    413: "too_large",
    429: "overloaded",
    503: "unavailable",
}


def outcome_for_status(status: int | None) -> str:
    if status is None:
        return "no_response"
    return _OUTCOMES.get(status, "error" if status >= 500 else f"http_{status}")


_SAFE_REQUEST_ID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")
_LOG_SAFE = "/!$&'()*+,;:@-._~"  # kept as they are in a log value; everything else is %XX


def request_id(raw: bytes | None) -> str:
    """The client's X-Request-ID when it is in the safe form, else a fresh one."""
    if raw is not None and _SAFE_REQUEST_ID.fullmatch(raw):
        return raw.decode("ascii")
    return os.urandom(16).hex()  # 128 random bits as 32 hex digits, like uuid4().hex at a fifth of its cost


_PLAIN = re.compile(r"[A-Za-z0-9/!$&'()*+,;:@._~-]*")  # the same set plus letters and digits: quote() is slow


_SAFE_TEXT: dict[str, str] = {}  # log_safe of the short texts seen (methods, paths, outcomes, classes), bounded
_SAFE_TEXT_MAX = 256


def log_safe(value: object) -> str:
    """A value for a `key=value` log field: no space, no control character, no `=`, nothing non-ASCII."""
    if type(value) is int:
        return str(value)
    text = str(value)
    safe = _SAFE_TEXT.get(text)
    if safe is None:
        safe = text if _PLAIN.fullmatch(text) else quote(text, safe=_LOG_SAFE)
        if len(text) <= 64 and len(_SAFE_TEXT) < _SAFE_TEXT_MAX:  # a client's odd paths cannot grow it
            _SAFE_TEXT[text] = safe
    return safe


class AccessMiddleware:
    def __init__(self, app: ASGIApp, *, metrics: Metrics, auth: TokenAuth, pacer: RequestPacer | None = None) -> None:
        self.app = app
        self.metrics = metrics
        self.auth = auth
        # requests a second per client while others have requests in progress (kgserve.http.pacing); None: no bound
        self.pacer = pacer if pacer is not None and pacer.enabled else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        client_rid = authorization = None
        for key, value in scope.get("headers", ()):  # ASGI header names are lower case
            if key == b"x-request-id":
                client_rid = value
            elif key == b"authorization":
                authorization = value
        rid = request_id(client_rid)
        state: dict[str, Any] = scope.setdefault("state", {})
        state["request_id"] = rid
        status: list[int] = []
        headers = [(b"x-request-id", rid.encode("ascii"))]

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
                message = {**message, "headers": [*message.get("headers", []), *headers]}
            await send(message)

        path: str = scope.get("path", "")
        allowed = True
        if self.auth.identifies:  # a credential is configured: who is this client (kgserve.admission.clients)
            allowed, state["credential"] = self.auth.check(
                path, authorization.decode("latin-1") if authorization is not None else None
            )
        pacer = self.pacer
        paced: str | None = None  # the client key counted in progress by the pacer
        try:
            if not allowed:
                await self._unauthorized(send_with_id)
            else:
                if pacer is not None:
                    paced, wait = pacer.start(scope, state)
                    if wait:
                        await self._pace(wait, state, headers)
                await self.app(scope, receive, send_with_id)
        except BaseException:
            state.setdefault("outcome", "error" if not status else outcome_for_status(status[0]))
            raise
        finally:
            if paced is not None and pacer is not None:
                pacer.finish(paced)
            self._finish(scope, state, status[0] if status else None, time.perf_counter() - started)

    async def _pace(self, wait: float, state: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> None:
        """The request waits its turn (its client is past its requests a second) and says so."""
        self.metrics.http_paced.inc()
        await asyncio.sleep(wait)
        waited = str(round(wait * 1000))
        headers.append((PACED_HEADER, waited.encode("ascii")))
        state.setdefault("log_extra", {})["paced_ms"] = waited

    @staticmethod
    async def _unauthorized(send: Send) -> None:
        body = json.dumps({"error": "kgserve: missing or wrong bearer token (Authorization: Bearer <token>)"})
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
            }
        )
        await send({"type": "http.response.body", "body": body.encode()})

    def _finish(self, scope: Scope, state: dict[str, Any], status: int | None, seconds: float) -> None:
        outcome = state.get("outcome") or outcome_for_status(status)
        path = scope.get("path", "")
        extra = "".join(f" {log_safe(key)}={log_safe(value)}" for key, value in (state.get("log_extra") or {}).items())
        line = (  # the request id is safe by construction (request_id)
            f"request id={state.get('request_id')} {log_safe(scope.get('method'))} {log_safe(path)} "
            f"status={status} outcome={log_safe(outcome)} latency_ms={seconds * 1000.0:.1f}{extra}"
        )
        write_access_line(line)
        self.metrics.observe(outcome, seconds if path != "/metrics" else None)
