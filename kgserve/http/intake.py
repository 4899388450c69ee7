"""From an HTTP request to the response for POST /analysis: read, split, classify, cap, admit.

Everything refused here is refused before the engine sees a byte (see kgserve.http.limits, kgserve.admission
and kgserve.http.analysis for what the client gets). `AnalysisEndpoint` is the route as a plain ASGI app, the
one registration of /analysis: the hot path reads the raw ASGI scope (no Request object, no routing or
dependency layer; kgserve.app puts it in front of the FastAPI app's own stack), and another method gets 405.

The request's client (kgserve.admission.clients: its address, and its token where one is configured) holds
its body's bytes of the memory budget while the body is read, then the request's queries, their bytes and
their interactive share (kgserve.admission.limits.Ticket) until they are over (kgserve.http.exchange).
"""

from __future__ import annotations

import time
from typing import Any

from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from kgserve.admission.budget import query_cost
from kgserve.admission.checks import CheckedQuery, check_query, classify_all
from kgserve.admission.clients import Client, client_key
from kgserve.admission.limits import Refusal, Ticket
from kgserve.admission.priority import (
    PriorityClass,
    UnknownClass,
    apply_classes,
    fairness_levels,
    parse_class,
)
from kgserve.context import ServeContext
from kgserve.http.analysis import AnalysisResponse, plain_ndjson, refusal
from kgserve.http.limits import (
    BadRequestHeader,
    BodyTooLarge,
    ClientGone,
    OverBudget,
    deadline_seconds,
    read_limited,
)
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


class _Checked:
    """A body's lines after the per-query checks."""

    __slots__ = ("clamped", "demoted", "interactive", "queries", "rejections")

    def __init__(self) -> None:
        self.queries: list[Query] = []
        self.rejections: list[bytes] = []
        self.clamped = False
        self.interactive = 0  # queries that run in the interactive class
        self.demoted = 0  # asked for interactive, past the client's share: run as batch


async def _check_lines(
    lines: list[bytes], size: int, ctx: ServeContext, klass: PriorityClass, client: Client, state: dict[str, Any]
) -> _Checked:
    """The lines after the per-query checks, the interactive ones within the client's share."""
    limits = ctx.settings.limits
    with_classes = bool(ctx.settings.priority.classes)
    checked = _Checked()
    classes: list[PriorityClass] = []
    items = await classify_all(lines, size)  # a big body is parsed on a thread: other requests run meanwhile
    # the share after that await: from here to admit() nothing awaits, so the client's count is current and this
    # request's interactive queries are charged to it before another request of the client reads it
    share = _interactive_share(ctx, client, state) if klass == "interactive" else 0
    for item in items:
        result = check_query(item, limits, ctx.cfg_visits) if isinstance(item, Query) else item
        if not isinstance(result, CheckedQuery):
            checked.rejections.append(result.error_line)
            continue
        if result.silent:
            continue
        query = result.query
        if with_classes:
            query_class = klass
            if klass == "interactive":
                if checked.interactive < share:
                    checked.interactive += 1
                else:
                    checked.demoted += 1
                    query_class = "batch"
            classes.append(query_class)
        checked.queries.append(query)
        checked.clamped = checked.clamped or result.clamped
    if with_classes:
        in_flight = fairness_levels(client.inflight, client.interactive, enabled=ctx.settings.priority.fairness)
        checked.queries = apply_classes(checked.queries, classes, in_flight)
    return checked


class _Refused(Exception):
    """The whole request is refused (the response says why)."""

    def __init__(self, response: Response) -> None:
        self.response = response


def _over(refused: Refusal, *, close: bool = False) -> _Refused:
    # Retry-After only on a 429 (a cap that frees up): a 413 could never fit, and retrying it cannot help
    headers = {"retry-after": str(RETRY_AFTER_S)} if refused.status == 429 else {}
    if close:
        headers["connection"] = "close"
    return _Refused(refusal(refused.status, refused.message, headers))


def _declared(length: bytes | None) -> int:
    try:
        return max(0, int(length)) if length is not None else 0
    except ValueError:
        return 0


async def _read_body(scope: Scope, receive: Receive, ctx: ServeContext, client: Client, state: dict[str, Any]) -> bytes:
    """The body, its bytes held in the client's memory budget while it is read (state["held"]): its
    Content-Length up front, or each chunk of a body without one."""
    limits = ctx.settings.limits
    admission = ctx.admission
    length = _headers(scope)[0]
    declared = _declared(length)
    refused: list[Refusal] = []

    def hold(size: int) -> bool:
        refusal = admission.charge(client, size)
        if refusal is not None:
            refused.append(refusal)
            return False
        state["held"] += size
        return True

    state["held"] = 0
    if 0 < declared <= limits.max_body_bytes and not hold(declared):
        # refused before its body is read: the connection is closed after the answer, not kept reading the body
        _note(state, refused=refused[0].reason)
        raise _over(refused[0], close=True)
    try:
        return await read_limited(length, receive, limits.max_body_bytes, None if declared else hold)
    except BodyTooLarge as exc:
        raise _Refused(refusal(413, f"kgserve: {exc} (limits.max_body_bytes)")) from None
    except OverBudget:
        _note(state, refused=refused[0].reason)
        raise _over(refused[0], close=True) from None
    except ClientGone:
        # gone before its body arrived (or cut by server.body_timeout_s, kgserve.http.httpguard): nothing to answer
        state["outcome"] = "body_timeout" if state.get("kgserve_timeout") == "body" else "disconnect"
        raise _Refused(Response(status_code=400)) from None


async def _read_request(
    scope: Scope, receive: Receive, ctx: ServeContext, client: Client, state: dict[str, Any]
) -> tuple[float, PriorityClass, bytes, list[bytes]]:
    """The request's deadline, priority class, body and body lines; _Refused for a request refused as a whole."""
    limits = ctx.settings.limits
    _, deadline, klass_header = _headers(scope)
    try:
        deadline_s = deadline_seconds(deadline.decode("latin-1") if deadline is not None else None, limits)
    except BadRequestHeader as exc:
        raise _Refused(refusal(400, f"kgserve: {exc}")) from None
    try:
        header = klass_header.decode("latin-1") if klass_header is not None else None
        klass = parse_class(header, ctx.settings.priority.http_default)
    except UnknownClass as exc:
        raise _Refused(refusal(400, f"kgserve: X-Priority-Class: {exc}")) from None
    body = await _read_body(scope, receive, ctx, client, state)
    lines = split_body(body)
    if not lines:
        raise _Refused(refusal(400, "kgserve: empty request body: send one JSON query or JSON lines"))
    if len(lines) > limits.max_queries_per_request:
        message = (
            f"kgserve: {len(lines)} request lines, over the limit of {limits.max_queries_per_request} "
            "(limits.max_queries_per_request)"
        )
        raise _Refused(refusal(413, message))
    return deadline_s, klass, body, lines


def _interactive_share(ctx: ServeContext, client: Client, state: dict[str, Any]) -> int:
    """How many more interactive queries this client may have in flight (its credential may lift the share)."""
    credential = state.get("credential")
    if credential is not None and credential.interactive:
        return ctx.settings.limits.max_inflight_queries
    return max(0, ctx.settings.priority.interactive_share - client.interactive)


async def handle_analysis(scope: Scope, receive: Receive, ctx: ServeContext) -> Response:
    state: dict[str, Any] = scope.setdefault("state", {})
    address = scope.get("client")
    credential = state.get("credential")
    admission = ctx.admission
    client = admission.clients.hold(client_key(address[0] if address else None, credential and credential.label))
    response: Response | None = None
    try:
        response = await _analysis(scope, receive, ctx, client, state)
        return response
    finally:
        if not isinstance(response, AnalysisResponse):  # an AnalysisResponse lets go when its queries are over
            if state.get("held"):
                admission.discharge(client, state["held"])
            admission.clients.let_go(client)


async def _admit_holding(
    ctx: ServeContext, client: Client, state: dict[str, Any], deadline_s: float, cost: tuple[int, int, int, int]
) -> Ticket | Refusal:
    """Admission, held (kgserve.admission.holding) while the client is past its per-client bound among contending
    clients: at most `limits.hold_past_share_s` and the request's deadline (its access line says `held_ms`); the
    refusal if it is still past it then (not counted yet: the caller counts it). `cost`: queries, memory bytes,
    interactive queries and bytes held already, as Admission.admit takes them."""
    admission = ctx.admission
    queries, memory, interactive, held = cost
    ticket = admission.admit(client, queries, memory, interactive, held=held, counted=False)
    if not isinstance(ticket, Refusal) or ticket.reason != "client_inflight" or not admission.hold_s:
        return ticket
    started = time.monotonic()
    end = started + min(admission.hold_s, deadline_s)
    while isinstance(ticket, Refusal) and ticket.reason == "client_inflight":
        left = end - time.monotonic()
        if left <= 0 or not await admission.held.wait(client.key, left):
            break
        ticket = admission.admit(client, queries, memory, interactive, held=held, counted=False)
    _note(state, held_ms=round((time.monotonic() - started) * 1000))
    return ticket


async def _analysis(
    scope: Scope, receive: Receive, ctx: ServeContext, client: Client, state: dict[str, Any]
) -> Response:
    try:
        deadline_s, klass, body, lines = await _read_request(scope, receive, ctx, client, state)
    except _Refused as refused:
        return refused.response
    limits = ctx.settings.limits
    checked = await _check_lines(lines, len(body), ctx, klass, client, state)
    queries = checked.queries
    _note(state, queries=len(queries), rejected=len(checked.rejections), priority_class=klass)
    headers = {"x-visits-clamped": str(limits.max_visits)} if checked.clamped else {}
    if checked.demoted:
        headers["x-priority-demoted"] = str(checked.demoted)
        _note(state, demoted=checked.demoted)
    if not queries:
        return plain_ndjson(400 if checked.rejections else 200, checked.rejections, headers)
    if ctx.pool is None:
        return refusal(503, "kgserve: the engine pool is not running", {"retry-after": str(RETRY_AFTER_S)})
    held = state["held"]
    cost = query_cost(len(body), len(queries))
    wants = (len(queries), max(0, cost - held), checked.interactive, held)
    ticket = await _admit_holding(ctx, client, state, deadline_s, wants)
    if isinstance(ticket, Refusal):
        ctx.admission.clients.refused(ticket.reason)
        _note(state, refused=ticket.reason)  # the access line says which bound (kgserve_refusals_total{reason})
        return _over(ticket).response
    state["held"] = 0  # the ticket holds the body's bytes now
    return AnalysisResponse(
        pool=ctx.pool,
        admission=ctx.admission,
        ticket=ticket,
        queries=queries,
        rejections=checked.rejections,
        deadline_s=deadline_s,
        state=state,
        headers=headers,
        terminate_grace_s=limits.terminate_grace_s,
        buffer_limit=ctx.settings.server.max_response_buffer_bytes,
        send_timeout_s=ctx.settings.server.send_timeout_s,
    )
