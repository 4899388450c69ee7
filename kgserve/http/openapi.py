"""kgserve's OpenAPI document, built as a plain dict (served at /openapi.json, rendered at /docs).

Written by hand rather than derived from the routes: POST /analysis reads its body itself (one JSON query
or JSON lines, answered as ndjson), which no request model describes, and the document must not change
when a route is rewritten (e.g. as a plain Starlette route). OpenAPI 3.0.3, the version the bundled
Swagger UI (4.x) renders. The examples are real: the sample query and the line KataGo v1.17.2 answered
(assets/analysis/), and the error lines kgserve writes, with this server's limits in them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kgserve import __version__
from kgserve.engine.client import is_simulated
from kgserve.http.httpguard import body_timeout_text
from kgserve.http.readiness import client_limits
from kgserve.katago.protocol import error_line
from kgserve.paths import PROJECT_ROOT
from kgserve.settings import Settings

__all__ = ["NDJSON", "SAMPLE_NAME", "build_openapi", "load_sample"]

NDJSON = "application/x-ndjson"
SAMPLE_NAME = "tsumego_straight3_9x9"  # the smallest sample: a 9x9 life-and-death problem, one answer line
SAMPLES = PROJECT_ROOT / "assets" / "analysis"
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
UNAUTHORIZED = {"error": "kgserve: missing or wrong bearer token (Authorization: Bearer <token>)"}


def load_sample(root: Path = SAMPLES) -> tuple[dict[str, Any], str] | None:
    """(the sample query, the first line KataGo answered to it), or None when the files are not there
    (kgserve installed without the repository's assets: the document then has no sample)."""
    try:
        query = json.loads((root / "inputs" / f"{SAMPLE_NAME}.json").read_text(encoding="utf-8"))
        answer = (root / "outputs" / f"{SAMPLE_NAME}.jsonl").read_text(encoding="utf-8").splitlines()[0]
    except (OSError, ValueError, IndexError):
        return None
    return query, answer


def _line(line: bytes | str) -> Any:
    """One response line as the example value (shown as JSON; on the wire it is that line plus \\n)."""
    return json.loads(line)


def _header(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "schema": schema}


def _lines_response(description: str, examples: dict[str, Any], headers: dict[str, Any]) -> dict[str, Any]:
    schema = {
        "type": "object",
        "description": f"one line of the body ({NDJSON}: one JSON object per line, each line ending in \\n)",
    }
    return {
        "description": description,
        "headers": headers,
        "content": {NDJSON: {"schema": schema, "examples": {k: {"value": v} for k, v in examples.items()}}},
    }


def _analysis_headers(settings: Settings) -> dict[str, dict[str, Any]]:
    """The response headers /analysis may send, by name, with this server's limits in their descriptions."""
    limits = settings.limits
    return {
        "X-Request-ID": _header(
            "the request's id (the client's X-Request-ID, or one kgserve made)", {"type": "string"}
        ),
        "Retry-After": _header("seconds to wait", {"type": "integer"}),
        "X-Visits-Clamped": _header(
            f"present when a query's maxVisits was over {limits.max_visits} and ran at that cap "
            "(visits_over_cap: clamp)",
            {"type": "integer"},
        ),
        "X-Deadline-Exceeded": _header(
            "`true` when the deadline cut queries before the status line was sent", {"type": "string"}
        ),
        "X-Priority-Demoted": _header(
            f"queries asked for as interactive that ran as batch: past this client's "
            f"{settings.priority.interactive_share} interactive queries in flight (priority.interactive_share)",
            {"type": "integer"},
        ),
        "X-Paced-Ms": _header(
            f"milliseconds the request waited before it was handled: its client was past "
            f"{limits.max_requests_per_s_per_client} requests a second (limits.max_requests_per_s_per_client) "
            "while other clients had requests in progress",
            {"type": "integer"},
        ),
    }


def _analysis_description(settings: Settings) -> str:
    """What /analysis takes and answers, and this server's limits on it."""
    limits = settings.limits
    server = settings.server
    return (
        "The body is what one would pipe into `katago analysis`: one JSON query (compact or pretty-printed) "
        "or JSON lines (`application/x-ndjson`, one query per line). The response is KataGo's lines for those "
        "queries, byte for byte, with the caller's ids, streamed in the order the engine writes them "
        "(partial `isDuringSearch` lines too, with `reportDuringSearchEvery`). Lines that KataGo would "
        "answer without an id, and the actions other than analysis, get an error line from kgserve and "
        "never reach the engine; they come first. The status is held until the first analysis line: 200 "
        "when some analysis came, 400 when every query was rejected (the body still holds the error lines). "
        f"Limits of this server: {limits.max_body_bytes} bytes per body, {limits.max_queries_per_request} "
        f"queries per request, {limits.max_inflight_queries} queries in flight, maxVisits up to "
        f"{limits.max_visits} ({limits.visits_over_cap} above), analyzeTurns up to {limits.max_turns_per_query} "
        f"entries, a deadline of {limits.deadline_s:g} s. On the deadline (or a client disconnect) kgserve "
        "sends `terminate` for every unfinished query and returns what KataGo answers, waiting at most "
        f"{limits.terminate_grace_s:g} s for it. Connection limits (docs/http-limits.md): request line and "
        f"headers up to {server.max_header_bytes} bytes (else 400 and close); headers complete within "
        f"{server.header_timeout_s:g} s and the body within {server.body_timeout_s:g} s of them (else 408 and "
        f"close); a client that reads nothing for {server.send_timeout_s:g} s, or leaves more than "
        f"{server.max_response_buffer_bytes} bytes of its response unread, is dropped and its queries "
        "terminated. An HTTP/1.0 client gets the whole response at the end, with a Content-Length."
    )


def _analysis_parameters(settings: Settings) -> list[dict[str, Any]]:
    """The request headers /analysis reads."""
    return [
        {
            "name": "X-Deadline-Ms",
            "in": "header",
            "description": f"a deadline shorter than this server's {settings.limits.deadline_s:g} s, in milliseconds",
            "schema": {"type": "number", "exclusiveMinimum": True, "minimum": 0},
        },
        {
            "name": "X-Priority-Class",
            "in": "header",
            "description": (
                "interactive queries run before batch ones in KataGo's queue (docs/interactive.md); "
                f"default {settings.priority.http_default}"
                + ("" if settings.priority.classes else "; ignored: priority classes are off on this server")
            ),
            "schema": {"type": "string", "enum": ["interactive", "batch"]},
        },
        {
            "name": "X-Request-ID",
            "in": "header",
            "description": "kept and returned when it is 1-128 of A-Z a-z 0-9 . _ : -; kgserve makes one otherwise",
            "schema": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,128}$"},
        },
    ]


def _analysis_refusals(settings: Settings, headers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """/analysis's answers other than 200, each with the error lines (or text) kgserve writes for it."""
    limits = settings.limits
    request_id = {"X-Request-ID": headers["X-Request-ID"]}
    retry = {name: headers[name] for name in ("X-Request-ID", "Retry-After")}
    over_cap = f"kgserve: maxVisits {limits.max_visits + 1} is over the cap of {limits.max_visits} (limits.max_visits)"
    return {
        "400": _lines_response(
            "every query rejected, an empty body, or a bad X-Deadline-Ms: error lines",
            {
                "rejected by KataGo": _line('{"error":"Illegal move 1: Q4","field":"moves","id":"illegal"}'),
                "over the visit cap": _line(error_line(over_cap, caller_id="q1", field="maxVisits")),
                "bad deadline header": _line(
                    error_line("kgserve: X-Deadline-Ms must be a positive number of milliseconds, got 'soon'")
                ),
            },
            request_id,
        ),
        "401": {
            "description": "a bearer token is required (server.auth_token_env) and was missing or wrong",
            "headers": {"WWW-Authenticate": _header("`Bearer`", {"type": "string"}), **request_id},
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/Error"}, "example": UNAUTHORIZED}
            },
        },
        "408": {
            "description": "the body was not complete server.body_timeout_s after the headers (or the headers "
            "server.header_timeout_s after the first byte); the connection is closed",
            "content": {"text/plain": {"schema": {"type": "string"}, "example": body_timeout_text(settings.server)}},
        },
        "413": _lines_response(
            "the body is over limits.max_body_bytes, or has more lines than limits.max_queries_per_request, or "
            "would hold more of the memory budget or more queries than one client may ever hold",
            {
                "too many lines": _line(
                    error_line(
                        f"kgserve: {limits.max_queries_per_request + 1} request lines, over the limit of "
                        f"{limits.max_queries_per_request} (limits.max_queries_per_request)"
                    )
                )
            },
            request_id,
        ),
        "429": _lines_response(
            "more queries in flight than limits.max_inflight_queries, or than one client may have while other "
            "clients have work in flight (limits.max_inflight_per_client; such a request first waits up to "
            "limits.hold_past_share_s for room), or more bytes of work in flight than the memory budget lets it "
            "(limits.memory_budget_bytes, limits.memory_per_client_bytes); or, with the server's connections "
            "(limits.max_connections) nearly all taken, more open connections from this address than "
            "limits.max_connections_per_client (a text/plain answer, the connection closed; behind a proxy of "
            "server.trusted_proxies: requests in progress per forwarded client, the connection kept): retry later",
            {
                "overloaded": _line(
                    error_line(
                        f"kgserve: over the limit of {limits.max_inflight_queries} queries in flight "
                        "(limits.max_inflight_queries); retry later"
                    )
                ),
                "one client's share": _line(
                    error_line(
                        f"kgserve: over the limit of {limits.max_inflight_per_client} queries in flight from one "
                        "client (limits.max_inflight_per_client); retry when some have finished"
                    )
                ),
            },
            retry,
        ),
        "503": _lines_response(
            "no engine to answer (the pool is not running, the engine died before the first line, or kgserve "
            "is shutting down)",
            {"no pool": _line(error_line("kgserve: the engine pool is not running"))},
            retry,
        ),
    }


def _analysis(settings: Settings, sample: tuple[dict[str, Any], str] | None) -> dict[str, Any]:
    """The POST /analysis operation: its prose, request headers and body, and every answer it may give."""
    headers = _analysis_headers(settings)
    query_schema: dict[str, Any] = {"$ref": "#/components/schemas/AnalysisQuery"}
    body_examples: dict[str, Any] = {}
    ok_examples: dict[str, Any] = {}
    if sample is not None:
        query, answer = sample
        body_examples = {"sample": {"summary": f"assets/analysis/inputs/{SAMPLE_NAME}.json", "value": query}}
        ok_examples = {f"KataGo v1.17.2's answer to {SAMPLE_NAME}": _line(answer)}
    ok_headers = ("X-Request-ID", "X-Visits-Clamped", "X-Deadline-Exceeded", "X-Priority-Demoted", "X-Paced-Ms")
    return {
        "summary": "Analyse positions: KataGo analysis queries in, KataGo's answer lines out",
        "description": _analysis_description(settings),
        "operationId": "analysis",
        "parameters": _analysis_parameters(settings),
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": query_schema, "examples": body_examples},
                NDJSON: {"schema": {"type": "string", "description": "one JSON query per line"}},
            },
        },
        "responses": {
            "200": _lines_response(
                "KataGo's answer lines (and error lines for the rejected queries of the request)",
                ok_examples,
                {name: headers[name] for name in ok_headers},
            ),
            **_analysis_refusals(settings, headers),
        },
    }


def _json_get(summary: str, responses: dict[str, tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    return {
        "summary": summary,
        "responses": {
            code: {"description": text, "content": {"application/json": {"schema": {"$ref": ref}, "example": example}}}
            for code, (text, ref, example) in responses.items()
        },
    }


def _components(auth: bool) -> dict[str, Any]:
    components: dict[str, Any] = {
        "schemas": {
            "AnalysisQuery": {
                "type": "object",
                "description": "a KataGo analysis query (KataGo docs/Analysis_Engine.md); other keys pass through",
                "required": ["id", "moves", "rules", "boardXSize", "boardYSize"],
                "properties": {
                    "id": {"type": "string"},
                    "moves": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
                    "initialStones": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
                    "rules": {"type": "string"},
                    "komi": {"type": "number"},
                    "boardXSize": {"type": "integer"},
                    "boardYSize": {"type": "integer"},
                    "maxVisits": {"type": "integer"},
                    "analyzeTurns": {"type": "array", "items": {"type": "integer"}},
                    "reportDuringSearchEvery": {"type": "number"},
                },
                "additionalProperties": True,
            },
            "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
            "Health": {"type": "object", "properties": {"status": {"type": "string", "enum": ["alive"]}}},
            "Readiness": {
                "type": "object",
                "properties": {
                    "ready": {"type": "boolean"},
                    "degraded": {
                        "type": "boolean",
                        "description": "true: some engine takes no query now (frozen, restarting, starting)",
                    },
                    "reason": {"type": "string", "nullable": True},
                    "backend": {"type": "string"},
                    "simulated": {"type": "boolean", "description": "true: the simulated engine, not KataGo"},
                    "katago_version": {"type": "string", "nullable": True, "description": "as the engine reports it"},
                    "model": {"type": "string"},
                    "synthetic_net": {
                        "type": "boolean",
                        "description": "true: the model is a synthetic net (random weights: analyses are noise)",
                    },
                    "throughput_test": {
                        "type": "boolean",
                        "description": "true: served as a throughput test (engine.throughput_test)",
                    },
                    "cfg": {"type": "string"},
                    "cfg_sha256": {
                        "type": "string",
                        "nullable": True,
                        "description": "sha256 of the cfg every engine runs",
                    },
                    "cfg_run_id": {"type": "string", "nullable": True, "description": "the run it was promoted from"},
                    "cfg_kept": {
                        "type": "string",
                        "nullable": True,
                        "description": "kgserve's copy, run on every restart",
                    },
                    "provenance": {"type": "object", "nullable": True, "description": "the cfg's promote header"},
                    "engines": {"type": "array", "items": {"type": "object"}},
                    "analysis_threads": {
                        "type": "integer",
                        "nullable": True,
                        "description": "numAnalysisThreads of each engine's cfg (null: the cfg does not say)",
                    },
                    "client_limits": {
                        "type": "object",
                        "description": "limits.max_inflight_queries, max_inflight_per_client, "
                        "max_connections_per_client and max_queries_per_request: what a bulk client sizes its work by",
                    },
                },
            },
        }
    }
    if auth:
        components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    return components


def build_openapi(settings: Settings, *, auth: bool = False, sample_root: Path = SAMPLES) -> dict[str, Any]:
    """The document for a kgserve with `settings`; `auth`: a bearer token is required on /analysis and
    /metrics (server.auth_token_env names a variable that is set)."""
    analysis = _analysis(settings, load_sample(sample_root))
    metrics: dict[str, Any] = {
        "summary": "Prometheus metrics (requests, latency, queries in flight, engines)",
        "responses": {
            "200": {
                "description": "Prometheus text format",
                "content": {PROMETHEUS_TEXT: {"schema": {"type": "string"}}},
            }
        },
    }
    if auth:
        for operation in (analysis, metrics):
            operation["security"] = [{"bearer": []}]
    else:
        del analysis["responses"]["401"]
    readiness = "#/components/schemas/Readiness"
    ready_example: dict[str, Any] = {
        "ready": True,
        "degraded": False,
        "reason": None,
        "backend": settings.engine.backend,
        "simulated": is_simulated(settings.engine.backend),
        "katago_version": "1.17.2",
        "model": str(settings.engine.model_for()),
        "synthetic_net": False,
        "throughput_test": settings.engine.throughput_test,
        "cfg": str(settings.engine.cfg),
        "provenance": None,
        "engines": [],
        "analysis_threads": 16,
        "client_limits": client_limits(settings),
    }
    not_ready = {
        **ready_example,
        "ready": False,
        "degraded": True,
        "reason": "no engine is ready",
        "katago_version": None,
    }
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "kgserve",
            "version": __version__,
            "description": "KataGo's analysis engine over HTTP. Bodies and answers are KataGo's own JSON lines.",
        },
        "paths": {
            "/analysis": {"post": analysis},
            "/healthz": {
                "get": _json_get(
                    "Liveness: the process answers (engines may still be starting)",
                    {"200": ("alive", "#/components/schemas/Health", {"status": "alive"})},
                )
            },
            "/readyz": {
                "get": _json_get(
                    "Readiness: what is served (backend, model, cfg and its provenance, simulated or not)",
                    {
                        "200": ("enough engines are ready", readiness, ready_example),
                        "503": (
                            "not ready, with the reason and each engine's last stderr lines (those only for a caller "
                            "with the bearer token when one is configured)",
                            readiness,
                            not_ready,
                        ),
                    },
                )
            },
            "/metrics": {"get": metrics},
        },
        "components": _components(auth),
    }
