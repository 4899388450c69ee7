"""POST /analysis: one request's queries, from the body to the last streamed line (run by kgserve.http.exchange).

What the client sees (also in docs/http-api.md):

- The body is what one would pipe into `katago analysis`: one JSON query (compact or pretty-printed) or
  JSON lines. Lines KataGo would answer without an id (not JSON, not an object, no string id, an unknown
  action) get KataGo's exact error line from kgserve itself; the five known actions get kgserve's own
  error line (`kgserve accepts analysis queries only: ...`). None of them reaches the engine. Their lines
  come first, in body order; the engine's lines follow in the order the engine writes them, with the
  caller's ids, byte for byte as KataGo wrote them (partial `isDuringSearch` lines as they are produced).
- Status: the status line must be sent before the first body byte, so kgserve holds the response back
  until the engine's first analysis line (`isDuringSearch` true or false) for any query of the request,
  or until every query is finished. 200 when some analysis came; 400 when every query was rejected
  (by kgserve or by the engine, e.g. an illegal move), the body still holding the error lines.
- Engine died (or could not take the query): 503. If the status line was already sent (200), the
  response goes on and each query the engine never finished gets a line
  `{"error":"engine died before finishing this query (...)","id":"<caller id>"}`.
- Deadline (limits.deadline_s, or a shorter `X-Deadline-Ms`): kgserve sends `terminate` for every
  unfinished query and streams what KataGo answers (its partial final result, or `noResults`). Header
  `X-Deadline-Exceeded: true` when the status line was not yet sent; otherwise each cut query gets a
  line `{"id":"<caller id>","warning":"kgserve: request deadline of N ms exceeded; ..."}` at the end.
  If the engine does not answer a terminate within limits.terminate_grace_s, the query ends with an error
  line (so a request ends close to its deadline even when thousands of terminates are queued).
- Slow client: kgserve never waits on a send. It holds at most server.max_response_buffer_bytes of response
  for a client that does not read (and no more than the memory budget lets it: kgserve.admission.budget);
  past that, or when the client takes nothing for server.send_timeout_s, the request's queries are
  terminated and the connection is dropped (outcome `slow_client`). The in-flight slots and the request's
  bytes of the budget go back when the queries are over, whatever the client does.
- Client disconnect, at any point: `terminate` for every unfinished query of the request, at once.
- Shutdown: a request still running when server.grace_period_s is over gets 503 (or, after a 200 status
  line, appended lines) `{"error":"kgserve is shutting down: this query was terminated","id":...}`.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from kgserve.admission.limits import Admission, Ticket
from kgserve.engine.client import EngineClient
from kgserve.http.exchange import Exchange
from kgserve.katago.protocol import Query, error_line

__all__ = ["NDJSON", "TERMINATE_GRACE_S", "AnalysisResponse", "plain_ndjson", "refusal"]

NDJSON = "application/x-ndjson"
TERMINATE_GRACE_S = 2.0  # the default of limits.terminate_grace_s


class AnalysisResponse(Response):
    """An ASGI response that runs the request's queries on the engine client while streaming their lines (it is the
    exchange's kgserve.http.exchange.Plan)."""

    def __init__(
        self,
        *,
        pool: EngineClient,
        admission: Admission,
        ticket: Ticket,
        queries: Sequence[Query],
        rejections: Sequence[bytes],
        deadline_s: float,
        state: dict[str, Any],
        headers: Mapping[str, str] | None = None,
        terminate_grace_s: float = TERMINATE_GRACE_S,
        buffer_limit: int = 1 << 20,
        send_timeout_s: float = 30.0,
    ) -> None:
        # no super().__init__: that would declare a Content-Length; this body is streamed (chunked)
        self.status_code = 200
        self.background = None
        self.raw_headers = [(b"content-type", NDJSON.encode()), (b"cache-control", b"no-store")] + [
            (key.lower().encode("latin-1"), value.encode("latin-1")) for key, value in (headers or {}).items()
        ]
        self.pool = pool
        self.admission = admission
        self.ticket = ticket
        self.queries = list(queries)
        self.rejections = list(rejections)
        self.deadline_s = deadline_s
        self.request_state = state
        self.terminate_grace_s = terminate_grace_s
        self.buffer_limit = buffer_limit
        self.send_timeout_s = send_timeout_s

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Coroutine[Any, Any, None]:
        # the exchange's own coroutine, not one awaiting it: one frame fewer on every resumption
        return Exchange(self, self.request_state, scope, receive, send).run()


def plain_ndjson(status: int, lines: Sequence[bytes], headers: Mapping[str, str] | None = None) -> Response:
    """A whole ndjson response known before any engine work (all rejected, or refused)."""
    return Response(b"".join(line + b"\n" for line in lines), status_code=status, media_type=NDJSON, headers=headers)


def refusal(status: int, message: str, headers: Mapping[str, str] | None = None) -> Response:
    """kgserve's own refusal of a whole request, as one ndjson error line."""
    return plain_ndjson(status, [error_line(message)], headers)
