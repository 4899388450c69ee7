"""Pure: turn a response (status + KataGo's lines) into a request outcome (status, bytes, visits, error kind)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class Outcome:
    status: int
    nbytes: int
    visits: int | None  # the final visits, summed over the turns answered
    error: str | None
    turns: int = 0  # analysed turns answered (final lines), also of a request that failed later
    partials: int = 0  # partial lines (reportDuringSearchEvery)


def error_kind_for_status(status: int) -> str | None:
    if status == 200:
        return None
    if status == 429:
        return "overload"
    if status == 503:
        return "unavailable"
    if 400 <= status < 500:
        return "client_error"
    return "server_error"


def final_visits(lines: Sequence[bytes]) -> tuple[int | None, str | None]:
    """(rootInfo.visits, error kind) from the response lines of ONE single-turn query.

    Only the last non-empty line is parsed (the final analysis comes last); an ``error`` line -> engine_error,
    no final analysis -> bad_response.
    """
    last = next((ln for ln in reversed(lines) if ln.strip()), None)
    if last is None:
        return None, "bad_response"
    # fast path (the load generator must stay cheap): decode only the rootInfo object of a 10-100 KB line
    idx = last.rfind(b'"rootInfo":')
    if idx >= 0 and b'"isDuringSearch":false' in last:
        try:
            root, _ = _DECODER.raw_decode(last[idx + 11 :].decode("utf-8"))
        except ValueError:
            return None, "bad_response"
        visits = root.get("visits") if isinstance(root, dict) else None
        return (int(visits) if isinstance(visits, int | float) else None), None
    try:
        doc = json.loads(last)
    except ValueError:
        return None, "bad_response"
    if not isinstance(doc, dict):
        return None, "bad_response"
    if "error" in doc:
        return None, "engine_error"
    if doc.get("isDuringSearch") or "rootInfo" not in doc:
        return None, "bad_response"
    visits = doc["rootInfo"].get("visits") if isinstance(doc["rootInfo"], dict) else None
    return (int(visits) if isinstance(visits, int | float) else None), None


def outcome_from_response(status: int, body: bytes) -> Outcome:
    kind = error_kind_for_status(status)
    if kind is not None:
        return Outcome(status, len(body), None, kind)
    visits, kind = final_visits(body.split(b"\n"))
    return Outcome(status, len(body), visits, kind)
