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
import re
from dataclasses import dataclass
from json.encoder import encode_basestring as _encode_string
from typing import Any, Literal

from kgserve.katago._nlohmann import NlohmannError, nlohmann_error, nlohmann_int, python_decode
from kgserve.katago._nlohmann import parse as nlohmann_parse
from kgserve.katago._nlohmann_dump import dump

__all__ = [
    "ANALYSIS_ONLY_ERROR",
    "INCLUDE_FIELDS",
    "KNOWN_ACTIONS",
    "READY_LINE",
    "TERMINATE_ID_ERROR",
    "TURN_NUMBERS_ERROR",
    "UNKNOWN_ACTION_ERROR",
    "DeferredJson",
    "LineKind",
    "Query",
    "Rejected",
    "analysed_turns",
    "classify_line",
    "dump_compact",
    "encode_query",
    "engine_line",
    "error_line",
    "line_kind",
    "locate_id",
    "nlohmann_parse_error",
    "no_results_line",
    "override_visits",
    "query_visits",
    "restore_id",
    "split_body",
    "strip_bom",
]

LineKind = Literal["final", "partial", "error", "warning", "other"]

# what KataGo writes on stderr once it takes queries (kgserve waits for it; the sim and the stand-in write it)
READY_LINE = "Started, ready to begin handling requests"
KNOWN_ACTIONS = ("query_version", "query_models", "clear_cache", "terminate", "terminate_all")
UNKNOWN_ACTION_ERROR = (
    "'action' field must be 'query_version' or 'query_models' or 'clear_cache' or 'terminate' or 'terminate_all'"
)
# KataGo's error texts for a terminate action's fields (its analysis loop, cpp/command/analysis.cpp)
TERMINATE_ID_ERROR = 'Requests for a terminate action must have a string "terminateId" field'
TURN_NUMBERS_ERROR = "If provided, must be an array of integers indicating turns to terminate"
ANALYSIS_ONLY_ERROR = "kgserve accepts analysis queries only: the '{action}' action is not available over HTTP"
_WHITESPACE = " \t\r\n\v\f"
UTF8_BOM = b"\xef\xbb\xbf"
# the include* fields of an analysis query (KataGo's docs/Analysis_Engine.md): booleans that add to its answer
INCLUDE_FIELDS = (
    "includeOwnership",
    "includeOwnershipStdev",
    "includeMovesOwnership",
    "includeMovesOwnershipStdev",
    "includePolicy",
    "includePVVisits",
    "includeNoResultValue",
)
VISITS_UNBOUNDED = 1 << 50  # KataGo's own bound on maxVisits, and what a search gets with none at all


@dataclass(frozen=True, slots=True)
class Query:
    caller_id: str
    body: dict[str, Any]
    expected_finals: int  # one isDuringSearch:false line per distinct analysed turn
    visits: int | None  # the search's visit bound as KataGo will read it (kgserve.katago.protocol.query_visits)
    # the request line as the client sent it (one line of compact or spaced JSON, no BOM), when the engine
    # can take it as it is; None when the body changed (a clamp) or the query was pretty-printed over lines
    raw: bytes | None = None

    @property
    def caller_id_json(self) -> bytes:
        # what json.dumps(caller_id, ensure_ascii=False) returns, without building an encoder per call
        return _encode_string(self.caller_id).encode("utf-8")


@dataclass(frozen=True, slots=True)
class Rejected:
    error_line: bytes  # exactly what KataGo (or kgserve, for actions) prints, without newline
    caller_id: str | None = None
    action: dict[str, Any] | None = None  # an action request (a string `action`), as KataGo parsed it


class DeferredJson:
    """A JSON value of a request kept as its (checked, valid) text until something needs it as Python values:
    a query's `moves` on the HTTP path, where the engine gets the client's own bytes and nothing in kgserve
    reads the moves (building ~200 lists and strings per query, then freeing them, was half its parse).
    Encoding a body holding one (`dump_compact`, `encode_query`) decodes it there."""

    __slots__ = ("text",)

    def __init__(self, text: bytes) -> None:
        self.text = text

    def value(self) -> Any:
        return json.loads(self.text)

    def __eq__(self, other: object) -> bool:
        other_value = other.value() if isinstance(other, DeferredJson) else other
        return bool(self.value() == other_value)

    __hash__ = None  # type: ignore[assignment]  # equal to a list: unhashable like one

    def __repr__(self) -> str:
        return f"DeferredJson({self.text[:40]!r}...)"


def _encode_deferred(value: object) -> Any:
    if isinstance(value, DeferredJson):
        return value.value()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dump_compact(value: Any) -> str:
    """nlohmann's `dump()` for the values a request can hold: compact, UTF-8, keys sorted, doubles as nlohmann
    prints them, any depth."""
    return dump(value, default=_encode_deferred)


def error_line(message: str, *, caller_id: str | None = None, field: str | None = None) -> bytes:
    payload: dict[str, str] = {"error": message}
    if field is not None:
        payload["field"] = field
    if caller_id is not None:
        payload["id"] = caller_id
    return dump_compact(payload).encode("utf-8")


def nlohmann_parse_error(line: str | bytes, reason: str | None = None) -> str:
    """KataGo's error text for a request line that is not JSON (`reason`: nlohmann's text, when known).

    A line holding invalid UTF-8 makes KataGo itself abort (it cannot print the line back as JSON); kgserve
    and the sim answer it, the bad bytes shown as U+FFFD."""
    raw = line.encode("utf-8", errors="surrogateescape") if isinstance(line, str) else line
    text = raw.decode("utf-8", errors="replace")
    reason = reason or nlohmann_error(raw) or "[json.exception.parse_error.101] parse error: invalid input"
    return f"{reason} - could not parse input line as json request: {text}"


def strip_bom(line: bytes) -> bytes:
    """The line without one leading UTF-8 byte order mark: nlohmann skips it at the start of a parse."""
    return line[3:] if line.startswith(UTF8_BOM) else line


def split_body(body: bytes) -> list[bytes]:
    """Request lines of an HTTP body: one JSON document (possibly pretty-printed) or JSON lines."""
    stripped = body.strip()
    if not stripped:
        return []
    if b"\n" not in stripped:  # one line (the common single query)
        return [stripped]
    document_text = strip_bom(stripped)
    if b"\n" in stripped and document_text[:1] in (b"{", b"["):
        try:
            document = json.loads(document_text)
        except (ValueError, RecursionError):
            document = None
        if isinstance(document, dict):
            return [stripped]
    return [line for line in (raw.strip() for raw in stripped.split(b"\n")) if line]


def _distinct_turns(value: Any) -> int:
    """How many final lines KataGo writes for this `analyzeTurns`: one per distinct turn after its own
    int conversion (`get<vector<int>>`: floats truncate, booleans count, big values wrap). Anything it
    cannot convert, and any invalid turn, gets one error line instead, which also ends the query."""
    if not isinstance(value, list) or not value:
        return 1
    try:
        return len({nlohmann_int(turn) for turn in value})
    except TypeError:
        return 1


def analysed_turns(body: dict[str, Any]) -> frozenset[int]:
    """The turn numbers KataGo analyses for this query (what a terminate's `turnNumbers` is matched against):
    `analyzeTurns` after its int conversion, else the turn after the last move; empty when KataGo would refuse
    the query (then no turn of it is ever open)."""
    turns = body.get("analyzeTurns")
    if turns is not None:
        try:
            return frozenset(nlohmann_int(turn) for turn in turns) if isinstance(turns, list) else frozenset()
        except TypeError:
            return frozenset()
    moves = body.get("moves")
    if isinstance(moves, DeferredJson):
        moves = moves.value()
    return frozenset((len(moves),)) if isinstance(moves, list) else frozenset()


def override_visits(settings: Any) -> int | None:
    """The maxVisits an `overrideSettings` object sets, read as KataGo's ConfigParser reads it.

    KataGo turns every value into a string (`dump()` for non-strings), an empty string deletes the key
    (so the search has no visit bound at all), and the int parse is `istringstream >> int64_t` with
    nothing left over. A value it cannot parse makes KataGo answer an error: None (nothing runs)."""
    if not isinstance(settings, dict) or "maxVisits" not in settings:
        return None
    raw = settings["maxVisits"]
    text = raw if isinstance(raw, str) else dump_compact(raw)
    if text == "":
        return VISITS_UNBOUNDED
    match = re.fullmatch(r"[ \t\r\n\v\f]*([+-]?[0-9]+)[ \t\r\n\v\f]*", text)
    if match is None or not 1 <= int(match.group(1)) <= VISITS_UNBOUNDED:
        return None  # KataGo: "Could not set settings" (an error line, no search)
    return int(match.group(1))


def query_visits(body: dict[str, Any]) -> int | None:
    """The visit bound KataGo will search this query with, when the query sets one itself.

    A top-level integer `maxVisits` wins (KataGo applies it after `overrideSettings`); otherwise the
    `overrideSettings` value; None when the query leaves it to the cfg."""
    visits = body.get("maxVisits")
    if type(visits) is int:
        return visits
    if "maxVisits" in body:
        return None  # not an integer: KataGo answers an error line, nothing is searched
    return override_visits(body.get("overrideSettings"))


_WHITESPACE_BYTES = _WHITESPACE.encode()


_MOVES_KEY = b'"moves":['
_MOVE_TEXT = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # a move's strings, in the fast path
_MOVE_SHAPE = b'["",""]'  # one move with its strings' text taken out
_MOVE_SHAPE_COMMA = _MOVE_SHAPE + b","


def _plain_moves(line: bytes) -> tuple[int, int] | None:
    """The byte span of the `moves` array when it is plain compact JSON of letters and digits
    (`[["B","Q16"],["W","D4"]]`) and the line's only "moves" key, in a line without a backslash; else None.

    Without a backslash no string holds a quote, so `"moves":[` is a key and its array (at some depth), and
    an array of that shape is one complete JSON value whatever its letters: the line is valid JSON exactly
    when the line with `0` in its place is. (An array followed by another "]]", e.g. `initialStones` after
    the moves, fails the shape check: decoded whole.)"""
    if b"\\" in line or line.count(b'"moves"') != 1:
        return None
    start = line.find(_MOVES_KEY)
    if start < 0:
        return None
    start += len(_MOVES_KEY) - 1
    # the array's end: its only "]]" once the shape below holds (a forward find is slow: every move ends in "]")
    end = line.rfind(b"]]", start) + 2
    if end < 2:
        return None
    shape = line[start:end].translate(None, _MOVE_TEXT)
    # the shape must be "[" + (count - 1) * '["",""],' + '["",""]' + "]": its middle tiled by the unit
    count, extra = divmod(len(shape) - 1, len(_MOVE_SHAPE_COMMA))
    middle_end = len(shape) - len(_MOVE_SHAPE) - 1
    if (
        count == 0
        or extra
        or not shape.startswith(b"[")
        or not shape.endswith(_MOVE_SHAPE + b"]")
        or shape.count(_MOVE_SHAPE_COMMA, 1, middle_end) != count - 1
    ):
        return None
    return start, end


def _decode_deferring_moves(line: bytes) -> Any:
    """The request line's value with a plain top-level `moves` array left as DeferredJson (see _plain_moves);
    None when the fast path does not apply (then decode it whole)."""
    span = _plain_moves(line)
    if span is None:
        return None
    start, end = span
    try:
        value = python_decode(line[:start] + b"0" + line[end:])
    except (ValueError, UnicodeError, RecursionError):
        return None  # invalid: the whole line's decode says how, as for any line
    if not isinstance(value, dict) or "moves" not in value:
        return None  # not an object, or the moves were nested deeper: decode the line whole
    value["moves"] = DeferredJson(line[start:end])
    return value


def classify_line(line: bytes, *, defer_moves: bool = False) -> Query | Rejected:
    """Classify one request line the way KataGo's request loop does, before any engine sees it.

    `defer_moves`: a plain `moves` array is not decoded (the body holds a DeferredJson): for a caller that
    sends the engine the line's own bytes and reads no move (kgserve's HTTP path)."""
    line = line.strip(_WHITESPACE_BYTES)
    text = strip_bom(line).lstrip(_WHITESPACE_BYTES)
    unmarked: bytes | None = text
    try:
        value = _decode_deferring_moves(text) if defer_moves else None
        if value is None:
            value = python_decode(text)
    except (ValueError, UnicodeError, RecursionError):
        # what Python's decoder refuses or cannot vouch for (a NUL byte ends nlohmann's input, any depth parses)
        try:
            value = nlohmann_parse(line)
        except NlohmannError as error:
            return Rejected(error_line(nlohmann_parse_error(line, error.message)))
        # the engine gets the value re-encoded: nothing it would ignore after a NUL, one line at any depth
        unmarked = dump(value).encode("utf-8") if isinstance(value, dict) else None
    if not isinstance(value, dict):
        return Rejected(
            error_line(f"Request line was valid json but was not an object, ignoring: {dump_compact(value)}")
        )
    caller_id = value.get("id")
    if not isinstance(caller_id, str):
        return Rejected(error_line('Request must have a string "id" field'))
    action = value.get("action")
    if isinstance(action, str):  # KataGo treats a line as an action only when `action` is a string
        if action in KNOWN_ACTIONS:
            message = ANALYSIS_ONLY_ERROR.format(action=action)
            return Rejected(error_line(message, caller_id=caller_id, field="action"), caller_id, value)
        return Rejected(error_line(UNKNOWN_ACTION_ERROR), caller_id, value)
    return Query(
        caller_id=caller_id,
        body=value,
        expected_finals=_distinct_turns(value.get("analyzeTurns")),
        visits=query_visits(value),
        raw=unmarked if unmarked is not None and b"\n" not in unmarked else None,
    )


def encode_query(body: dict[str, Any], internal_id: str) -> bytes:
    """The request line sent to the engine: the caller's query under kgserve's internal id."""
    with_internal_id = dict(body)
    with_internal_id["id"] = internal_id
    text = json.dumps(with_internal_id, ensure_ascii=False, separators=(",", ":"), default=_encode_deferred)
    return (text + "\n").encode("utf-8")


def engine_line(query: Query, internal_id: str) -> bytes:
    """The request line for the engine: the client's own bytes with `"id":"<internal>"` appended as the last
    key (KataGo's JSON reader keeps the last of duplicate keys, as Python's does), so nothing is re-encoded.
    A query without usable raw bytes is encoded from its body."""
    raw = query.raw
    if raw is None:
        return encode_query(query.body, internal_id)
    return b'%s,"id":"%s"}\n' % (raw[:-1], internal_id.encode("ascii"))


def no_results_line(caller_id_json: bytes, turn: int) -> bytes:
    """What KataGo answers, per analysed turn, when a query terminated before it started searching
    (the katago-reference transcript terminate_queued: keys sorted, compact)."""
    return b'{"id":%s,"isDuringSearch":false,"noResults":true,"turnNumber":%d}' % (caller_id_json, turn)


_ID_KEY = b'"id":"'


def locate_id(line: bytes) -> tuple[int, int] | None:
    """Byte span of the id value (inside the quotes) of a KataGo response line, if it has one.

    KataGo sorts keys, so the top-level "id" comes after only "action", "error" and "field"; string
    values escape every quote, so the first `"id":"` is the top-level key. The value ends at the first
    quote not escaped by a backslash (a caller's id, once restored, may hold `\\"` or `\\\\`).
    """
    start = line.find(_ID_KEY)
    if start < 0:
        return None
    start += len(_ID_KEY)
    end = line.find(b'"', start)
    while end > 0 and line[end - 1] == 0x5C:  # a backslash before it: count the run
        backslashes = len(line[start:end]) - len(line[start:end].rstrip(b"\\"))
        if backslashes % 2 == 0:
            break
        end = line.find(b'"', end + 1)
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
