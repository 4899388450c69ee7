"""KataGo's analysis protocol over a WebSocket (default path /ws), as KaTrain's remote engine speaks it.

- Handshake: the bearer token as `Authorization: Bearer <token>` or as a `token` query parameter
  (never logged, see kgserve.http.logredact); a wrong or missing one gets HTTP 401 instead of the upgrade.
  `priority_class=interactive|batch` picks the connection's class (default: priority.websocket_default);
  an unknown class gets HTTP 400.
- Each text (or binary) message is one JSON query or JSON lines, read as POST /analysis reads a body; a
  message over limits.max_body_bytes closes the connection (1009).
  Each line KataGo writes comes back as its own text message, the caller's id restored, byte for byte as
  over /analysis; kgserve's own lines (refusals, warnings, acknowledgements) have KataGo's shape.
- Actions act on this connection's queries only: `terminate` (`terminateId`, optional `turnNumbers`)
  and `terminate_all` (optional `turnNumbers`) are acknowledged with the request echoed, as KataGo does;
  `query_version` is answered with the engine's version; every other action gets an error line.
- `maxVisits` over limits.max_visits is clamped, with a warning line naming the cap (KaTrain ponders with
  maxVisits 10000000): `{"field":"maxVisits","id":..,"isDuringSearch":true,"noResults":true,"warning":..}`,
  KataGo's warning shape plus two keys that keep KaTrain from taking it for the final result.
- Bounds: at most websocket.max_inflight_per_connection queries of a connection in flight, and the
  per-client (limits.max_inflight_per_client) and server-wide (limits.max_inflight_queries) bounds and the
  memory budget (kgserve.admission): a query over any gets an error line, the connection stays open. An
  interactive connection's queries past its client's priority.interactive_share run as batch (unless it
  presented a priority.interactive_token_env token). Answers waiting to be sent are bounded by
  websocket.send_buffer_bytes and the budget: a client that stops reading has its queries terminated and its
  connection closed (1008) and reset; pings get no pong while it does not read (kgserve.ws.wsguard).
- Closing the connection terminates its queries. On SIGTERM, running queries get server.grace_period_s, then
  an error line each, then close 1001 (kgserve.ws.wsconnection).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from starlette.responses import JSONResponse
from starlette.websockets import WebSocket, WebSocketDisconnect

from kgserve.admission.priority import PriorityClass, UnknownClass, parse_class
from kgserve.auth import TokenAuth
from kgserve.context import ServeContext
from kgserve.logformat import write_access_line
from kgserve.metrics import Metrics
from kgserve.ws.wsconnection import Connection

__all__ = ["websocket_endpoint"]


async def _deny(websocket: WebSocket, status: int, message: str) -> None:
    headers = {"www-authenticate": "Bearer"} if status == 401 else None
    await websocket.send_denial_response(JSONResponse({"error": message}, status_code=status, headers=headers))


async def websocket_endpoint(websocket: WebSocket) -> None:
    ctx: ServeContext = websocket.app.state.kgserve
    metrics: Metrics = websocket.app.state.metrics
    auth: TokenAuth = websocket.app.state.auth
    started = time.perf_counter()
    connection_id = uuid.uuid4().hex
    path = websocket.url.path
    # client=<address> behind a trusted proxy (kgserve.forwarded), first among the access line's extras
    noted: dict[str, Any] = dict((websocket.scope.get("state") or {}).get("log_extra") or {})
    authorization, token = websocket.headers.get("authorization"), websocket.query_params.get("token")
    if not auth.allows_websocket(authorization, token):
        await _deny(websocket, 401, "kgserve: missing or wrong token (Authorization: Bearer <token>, or ?token=)")
        _access(connection_id, path, "unauthorized", started, noted)
        return
    credential = (auth.bearer(authorization) or auth.identify(token)) if auth.identifies else None
    try:
        klass: PriorityClass = parse_class(
            websocket.query_params.get("priority_class"), ctx.settings.priority.websocket_default
        )
    except UnknownClass as exc:
        await _deny(websocket, 400, f"kgserve: priority_class: {exc}")
        _access(connection_id, path, "rejected", started, noted)
        return
    await websocket.accept()
    metrics.websocket_opened()
    connection = Connection(websocket, ctx, metrics, klass, credential)
    outcome = "error"
    try:
        outcome = await connection.run()
    except WebSocketDisconnect:
        outcome = "closed"
    finally:
        await connection.shutdown()
        seconds = time.perf_counter() - started
        metrics.websocket_closed(outcome, seconds)
        _access(connection_id, path, outcome, started, {**noted, **connection.counts, "priority_class": klass})


def _access(connection_id: str, path: str, outcome: str, started: float, extra: dict[str, Any]) -> None:
    # the path only: the query string may hold the token
    detail = "".join(f" {key}={value}" for key, value in extra.items())
    duration_ms = (time.perf_counter() - started) * 1000.0
    write_access_line(f"websocket id={connection_id} {path} outcome={outcome} duration_ms={duration_ms:.1f}{detail}")
