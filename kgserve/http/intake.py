"""From an HTTP request to the response for POST /analysis: read, split, classify, cap, admit.

Everything refused here is refused before the engine sees a byte (see kgserve.http.limits, kgserve.admission
and kgserve.http.analysis for what the client gets). `AnalysisEndpoint` is the route as a plain ASGI app, the
one registration of /analysis: the hot path reads the raw ASGI scope (no Request object, no routing or
dependency layer; kgserve.app puts it in front of the FastAPI app's own stack), and another method gets 405.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from kgserve.admission.checks import CheckedQuery, check_query, classify_safely
from kgserve.admission.priority import PriorityClass, UnknownClass, apply_class, parse_class
from kgserve.context import ServeContext
from kgserve.http.analysis import AnalysisResponse, plain_ndjson, refusal
from kgserve.http.limits import BadRequestHeader, BodyTooLarge, ClientGone, deadline_seconds, read_limited
from kgserve.katago.protocol import Query, split_body

__all__ = ["RETRY_AFTER_S", "AnalysisEndpoint", "handle_analysis"]

RETRY_AFTER_S = 1
METHOD_NOT_ALLOWED = JSONResponse({"detail": "Method Not Allowed"}, status_code=405, headers={"allow": "POST"})


def _note(state: dict[str, Any], **values: Any) -> None:
    state.setdefault("log_extra", {}).update(values)


class AnalysisEndpoint:
    """/analysis as an ASGI app: POST runs the request's queries; any other method gets 405."""

    def __init__(self, ctx: ServeContext) -> None:
        self.ctx = ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] == "POST":
            response = await handle_analysis(scope, receive, self.ctx)
        else:
            response = METHOD_NOT_ALLOWED
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


def _check_lines(lines: list[bytes], ctx: ServeContext, klass: PriorityClass) -> tuple[list[Query], list[bytes], bool]:
    """A body's lines after the per-query checks: (queries to run, rejection lines, whether any was clamped)."""
    limits = ctx.settings.limits
    with_classes = bool(ctx.settings.priority.classes)
    queries: list[Query] = []
    rejections: list[bytes] = []
    clamped = False
    for line in lines:
        item = classify_safely(line)
        checked = check_query(item, limits, ctx.cfg_visits) if isinstance(item, Query) else item
        if isinstance(checked, CheckedQuery):
            if checked.silent:
                continue
            queries.append(apply_class(checked.query, klass) if with_classes else checked.query)
            clamped = clamped or checked.clamped
        else:
            rejections.append(checked.error_line)
    return queries, rejections, clamped


class _Refused(Exception):
    """The whole request is refused (the response says why)."""

    def __init__(self, response: Response) -> None:
        self.response = response


async def _read_request(
    scope: Scope, receive: Receive, ctx: ServeContext, state: dict[str, Any]
) -> tuple[float, PriorityClass, list[bytes]]:
    """The request's deadline, priority class and body lines; _Refused for a request refused as a whole."""
    limits = ctx.settings.limits
    length, deadline, klass_header = _headers(scope)
    try:
        deadline_s = deadline_seconds(deadline.decode("latin-1") if deadline is not None else None, limits)
    except BadRequestHeader as exc:
        raise _Refused(refusal(400, f"kgserve: {exc}")) from None
    try:
        header = klass_header.decode("latin-1") if klass_header is not None else None
        klass = parse_class(header, ctx.settings.priority.http_default)
    except UnknownClass as exc:
        raise _Refused(refusal(400, f"kgserve: X-Priority-Class: {exc}")) from None
    try:
        body = await read_limited(length, receive, limits.max_body_bytes)
    except BodyTooLarge as exc:
        raise _Refused(refusal(413, f"kgserve: {exc} (limits.max_body_bytes)")) from None
    except ClientGone:
        # gone before its body arrived (or cut by server.body_timeout_s, kgserve.http.httpguard): nothing to answer
        state["outcome"] = "body_timeout" if state.get("kgserve_timeout") == "body" else "disconnect"
        raise _Refused(Response(status_code=400)) from None
    lines = split_body(body)
    if not lines:
        raise _Refused(refusal(400, "kgserve: empty request body: send one JSON query or JSON lines"))
    if len(lines) > limits.max_queries_per_request:
        message = (
            f"kgserve: {len(lines)} request lines, over the limit of {limits.max_queries_per_request} "
            "(limits.max_queries_per_request)"
        )
        raise _Refused(refusal(413, message))
    return deadline_s, klass, lines


async def handle_analysis(scope: Scope, receive: Receive, ctx: ServeContext) -> Response:
    state: dict[str, Any] = scope.setdefault("state", {})
    try:
        deadline_s, klass, lines = await _read_request(scope, receive, ctx, state)
    except _Refused as refused:
        return refused.response
    limits = ctx.settings.limits
    queries, rejections, clamped = _check_lines(lines, ctx, klass)
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
