"""From an HTTP request to the response for POST /analysis: read, split, classify, cap, admit.

Everything refused here is refused before the engine sees a byte (see kgserve.limits and
kgserve.analysis for what the client gets).
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from kgserve.analysis import AnalysisResponse, plain_ndjson, refusal
from kgserve.context import ServeContext
from kgserve.limits import (
    BadRequestHeader,
    BodyTooLarge,
    CheckedQuery,
    check_query,
    deadline_seconds,
    read_limited,
)
from kgserve.priority import UnknownClass, apply_class, parse_class
from kgserve.protocol import Query, Rejected, classify_line, error_line, split_body

__all__ = ["RETRY_AFTER_S", "classify_safely", "handle_analysis"]

RETRY_AFTER_S = 1
log = logging.getLogger("kgserve.intake")


def _note(request: Request, **values: Any) -> None:
    extra = getattr(request.state, "log_extra", None) or {}
    extra.update(values)
    request.state.log_extra = extra


def classify_safely(line: bytes) -> Query | Rejected:
    """protocol.classify_line, but a line it cannot handle is refused instead of failing the request."""
    try:
        return classify_line(line)
    except Exception as exc:  # e.g. RecursionError on pathological nesting: never a 500
        log.warning("cannot classify a request line of %d bytes: %s: %s", len(line), type(exc).__name__, exc)
        preview = line[:80].decode("utf-8", errors="replace")
        return Rejected(error_line(f"kgserve: cannot parse this request line ({type(exc).__name__}): {preview}"))


async def handle_analysis(request: Request, ctx: ServeContext) -> Response:
    limits = ctx.settings.limits
    try:
        deadline_s = deadline_seconds(request.headers.get("x-deadline-ms"), limits)
    except BadRequestHeader as exc:
        return refusal(400, f"kgserve: {exc}")
    classes = ctx.settings.priority
    try:
        klass = parse_class(request.headers.get("x-priority-class"), classes.http_default)
    except UnknownClass as exc:
        return refusal(400, f"kgserve: X-Priority-Class: {exc}")
    try:
        body = await read_limited(request.headers.get("content-length"), request.stream(), limits.max_body_bytes)
    except BodyTooLarge as exc:
        return refusal(413, f"kgserve: {exc} (limits.max_body_bytes)")
    except ClientDisconnect:
        # gone before its body arrived (or cut by server.body_timeout_s, kgserve.httpguard): nothing to answer
        timed_out = getattr(request.state, "kgserve_timeout", None) == "body"
        request.state.outcome = "body_timeout" if timed_out else "disconnect"
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
    _note(request, queries=len(queries), rejected=len(rejections), priority_class=klass)
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
        state=request.state,
        headers=headers,
        terminate_grace_s=limits.terminate_grace_s,
        buffer_limit=ctx.settings.server.max_response_buffer_bytes,
        send_timeout_s=ctx.settings.server.send_timeout_s,
    )
