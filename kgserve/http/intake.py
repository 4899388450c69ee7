"""From an HTTP request to the response for POST /analysis: read, split, classify, cap, admit.

Everything refused here is refused before the engine sees a byte (see kgserve.http.limits and
kgserve.http.analysis for what the client gets). `AnalysisEndpoint` is the route as a plain ASGI app: the
hot path reads the raw ASGI scope (no Request object, no routing or dependency layer; kgserve.app puts
it in front of the FastAPI app's own stack).
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from kgserve.http.analysis import AnalysisResponse, plain_ndjson, refusal
from kgserve.http.context import ServeContext
from kgserve.http.limits import (
    BadRequestHeader,
    BodyTooLarge,
    CheckedQuery,
    ClientGone,
    check_query,
    deadline_seconds,
    read_limited,
)
from kgserve.http.priority import UnknownClass, apply_class, parse_class
from kgserve.katago.protocol import Query, Rejected, classify_line, error_line, split_body

__all__ = ["RETRY_AFTER_S", "AnalysisEndpoint", "classify_safely", "handle_analysis"]

RETRY_AFTER_S = 1
log = logging.getLogger("kgserve.intake")


def _note(state: dict[str, Any], **values: Any) -> None:
    state.setdefault("log_extra", {}).update(values)


def classify_safely(line: bytes) -> Query | Rejected:
    """protocol.classify_line (moves left undecoded), but a line it cannot handle is refused instead of failing
    the request."""
    try:
        return classify_line(line, defer_moves=True)  # the engine gets the line's bytes: no move is read here
    except Exception as exc:  # e.g. RecursionError on pathological nesting: never a 500
        log.warning("cannot classify a request line of %d bytes: %s: %s", len(line), type(exc).__name__, exc)
        preview = line[:80].decode("utf-8", errors="replace")
        return Rejected(error_line(f"kgserve: cannot parse this request line ({type(exc).__name__}): {preview}"))


class AnalysisEndpoint:
    """POST /analysis as an ASGI app."""

    def __init__(self, ctx: ServeContext) -> None:
        self.ctx = ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await handle_analysis(scope, receive, self.ctx)
        await response(scope, receive, send)


def _headers(scope: Scope) -> tuple[bytes | None, bytes | None, bytes | None]:
    """Content-Length, X-Deadline-Ms and X-Priority-Class (ASGI servers give header names in lower case)."""
    length = deadline = klass = None
    for key, value in scope["headers"]:
        if key == b"content-length":
            length = value
        elif key == b"x-deadline-ms":
            deadline = value
        elif key == b"x-priority-class":
            klass = value
    return length, deadline, klass


async def handle_analysis(scope: Scope, receive: Receive, ctx: ServeContext) -> Response:
    limits = ctx.settings.limits
    state: dict[str, Any] = scope.setdefault("state", {})
    length, deadline, klass_header = _headers(scope)
    try:
        deadline_s = deadline_seconds(deadline.decode("latin-1") if deadline is not None else None, limits)
    except BadRequestHeader as exc:
        return refusal(400, f"kgserve: {exc}")
    classes = ctx.settings.priority
    try:
        klass = parse_class(klass_header.decode("latin-1") if klass_header is not None else None, classes.http_default)
    except UnknownClass as exc:
        return refusal(400, f"kgserve: X-Priority-Class: {exc}")
    try:
        body = await read_limited(length, receive, limits.max_body_bytes)
    except BodyTooLarge as exc:
        return refusal(413, f"kgserve: {exc} (limits.max_body_bytes)")
    except ClientGone:
        # gone before its body arrived (or cut by server.body_timeout_s, kgserve.http.httpguard): nothing to answer
        state["outcome"] = "body_timeout" if state.get("kgserve_timeout") == "body" else "disconnect"
        return Response(status_code=400)
    lines = split_body(body)
    if not lines:
        return refusal(400, "kgserve: empty request body: send one JSON query or JSON lines")
    if len(lines) > limits.max_queries_per_request:
        return refusal(
            413,
            f"kgserve: {len(lines)} request lines, over the limit of {limits.max_queries_per_request} "
            "(limits.max_queries_per_request)",
        )
    queries: list[Query] = []
    rejections: list[bytes] = []
    clamped: list[str] = []
    for line in lines:
        item = classify_safely(line)
        checked = check_query(item, limits, ctx.cfg_visits) if isinstance(item, Query) else item
        if isinstance(checked, CheckedQuery):
            if checked.silent:
                continue
            queries.append(apply_class(checked.query, klass) if classes.classes else checked.query)
            if checked.clamped:
                clamped.append(checked.query.caller_id)
        else:
            rejections.append(checked.error_line)
    _note(state, queries=len(queries), rejected=len(rejections), priority_class=klass)
    headers = {"x-visits-clamped": str(limits.max_visits)} if clamped else {}
    if not queries:
        return plain_ndjson(400 if rejections else 200, rejections, headers)
    if ctx.pool is None:
        return refusal(503, "kgserve: the engine pool is not running", {"retry-after": str(RETRY_AFTER_S)})
    if not ctx.admission.try_acquire(len(queries)):
        return refusal(
            429,
            f"kgserve: over the limit of {ctx.admission.max_inflight} queries in flight "
            "(limits.max_inflight_queries); retry later",
            {"retry-after": str(RETRY_AFTER_S)},
        )
    return AnalysisResponse(
        pool=ctx.pool,
        admission=ctx.admission,
        queries=queries,
        rejections=rejections,
        deadline_s=deadline_s,
        state=state,
        headers=headers,
        terminate_grace_s=limits.terminate_grace_s,
        buffer_limit=ctx.settings.server.max_response_buffer_bytes,
        send_timeout_s=ctx.settings.server.send_timeout_s,
    )
