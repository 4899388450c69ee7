"""KataGo analysis protocol, as pure functions over request and response lines.

Requests: `split_body` turns an HTTP body into request lines; `classify_line` decides, as KataGo's
request loop would, whether a line is an analysis query or gets an error line without an id (not JSON,
not an object, no string id) — those, and every `action`, never reach the engine.

Responses are never parsed and re-serialised: that would change KataGo's float formatting and key
order. KataGo prints compact JSON with sorted keys, so `"id":"` is found by a byte search and
`isDuringSearch` follows the id directly; `locate_id`, `restore_id` and `line_kind` work on bytes.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal

from kgserve._nlohmann import nlohmann_error

__all__ = [
    "ANALYSIS_ONLY_ERROR",
    "LineKind",
    "Query",
    "Rejected",
    "classify_line",
    "dump_compact",
    "encode_query",
    "error_line",
    "line_kind",
    "locate_id",
    "nlohmann_parse_error",
    "restore_id",
    "split_body",
]

LineKind = Literal["final", "partial", "error", "warning", "other"]

KNOWN_ACTIONS = ("query_version", "query_models", "clear_cache", "terminate", "terminate_all")
UNKNOWN_ACTION_ERROR = (
    "'action' field must be 'query_version' or 'query_models' or 'clear_cache' or 'terminate' or 'terminate_all'"
)
ANALYSIS_ONLY_ERROR = "kgserve accepts analysis queries only: the '{action}' action is not available over HTTP"
_WHITESPACE = " \t\r\n\v\f"


@dataclass(frozen=True, slots=True)
class Query:
    caller_id: str
    body: dict[str, Any]
    expected_finals: int  # one isDuringSearch:false line per distinct analysed turn
    visits: int | None  # maxVisits when given as an integer

    @property
    def caller_id_json(self) -> bytes:
        return json.dumps(self.caller_id, ensure_ascii=False).encode("utf-8")


@dataclass(frozen=True, slots=True)
class Rejected:
    error_line: bytes  # exactly what KataGo (or kgserve, for actions) prints, without newline
    caller_id: str | None = None


def dump_compact(value: Any) -> str:
    """nlohmann's `dump()` for the values a request can hold: compact, UTF-8, keys sorted."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def error_line(message: str, *, caller_id: str | None = None, field: str | None = None) -> bytes:
    payload: dict[str, str] = {"error": message}
    if field is not None:
        payload["field"] = field
    if caller_id is not None:
        payload["id"] = caller_id
    return dump_compact(payload).encode("utf-8")


def nlohmann_parse_error(line: str | bytes) -> str:
    """KataGo's error text for a request line that is not JSON."""
    raw = line.encode("utf-8", errors="surrogateescape") if isinstance(line, str) else line
    text = raw.decode("utf-8", errors="replace")
    reason = nlohmann_error(raw) or "[json.exception.parse_error.101] parse error: invalid input"
    return f"{reason} - could not parse input line as json request: {text}"


def split_body(body: bytes) -> list[bytes]:
    """Request lines of an HTTP body: one JSON document (possibly pretty-printed) or JSON lines."""
    stripped = body.strip()
    if not stripped:
        return []
    if b"\n" in stripped and stripped[:1] in (b"{", b"["):
        try:
            document = json.loads(stripped)
        except (ValueError, RecursionError):
            document = None
        if isinstance(document, dict):
            return [stripped]
    return [line for line in (raw.strip() for raw in stripped.split(b"\n")) if line]


def _reject_non_finite(text: str) -> float:
    raise ValueError(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(text)
    return value


def _distinct_turns(value: Any) -> int:
    if isinstance(value, list) and value and all(type(turn) is int for turn in value):
        return len(set(value))
    return 1  # KataGo answers anything else with one error line or analyses the last turn only


def classify_line(line: bytes) -> Query | Rejected:
    """Classify one request line the way KataGo's request loop does, before any engine sees it."""
    line = line.strip(_WHITESPACE.encode())
    try:
        text = line.decode("utf-8")
        value = json.loads(text, parse_constant=_reject_non_finite, parse_float=_parse_float)
        # lone surrogates (from \\ud800 escapes) are valid for Python but not for nlohmann
        dump_compact(value).encode("utf-8")
    except (ValueError, UnicodeError, RecursionError):
        return Rejected(error_line(nlohmann_parse_error(line)))
    if not isinstance(value, dict):
        return Rejected(
            error_line(f"Request line was valid json but was not an object, ignoring: {dump_compact(value)}")
        )
    caller_id = value.get("id")
    if not isinstance(caller_id, str):
        return Rejected(error_line('Request must have a string "id" field'))
    if "action" in value:
        action = value["action"]
        if isinstance(action, str) and action in KNOWN_ACTIONS:
            message = ANALYSIS_ONLY_ERROR.format(action=action)
            return Rejected(error_line(message, caller_id=caller_id, field="action"), caller_id)
        return Rejected(error_line(UNKNOWN_ACTION_ERROR), caller_id)
    visits = value.get("maxVisits")
    return Query(
        caller_id=caller_id,
        body=value,
        expected_finals=_distinct_turns(value.get("analyzeTurns")),
        visits=visits if type(visits) is int else None,
    )


def encode_query(body: dict[str, Any], internal_id: str) -> bytes:
    """The request line sent to the engine: the caller's query under kgserve's internal id."""
    with_internal_id = dict(body)
    with_internal_id["id"] = internal_id
    return (json.dumps(with_internal_id, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


_ID_KEY = b'"id":"'


def locate_id(line: bytes) -> tuple[int, int] | None:
    """Byte span of the id value (inside the quotes) of a KataGo response line, if it has one.

    KataGo sorts keys, so the top-level "id" comes after only "action", "error" and "field"; string
    values escape every quote, so the first `"id":"` is the top-level key.
    """
    start = line.find(_ID_KEY)
    if start < 0:
        return None
    start += len(_ID_KEY)
    end = line.find(b'"', start)
    if end < 0:
        return None
    return start, end


def restore_id(line: bytes, span: tuple[int, int], caller_id_json: bytes) -> bytes:
    """The line with the id value replaced by the caller's (already JSON-encoded) id, all else verbatim."""
    return line[: span[0] - 1] + caller_id_json + line[span[1] + 1 :]


_FINAL = b'","isDuringSearch":false'
_PARTIAL = b'","isDuringSearch":true'


def line_kind(line: bytes, id_end: int) -> LineKind:
    if line.startswith(_FINAL, id_end):
        return "final"
    if line.startswith(_PARTIAL, id_end):
        return "partial"
    if line.startswith(b'{"error":'):
        return "error"
    if line.startswith(b'{"field":') and b'"warning":' in line:
        return "warning"
    return "other"
