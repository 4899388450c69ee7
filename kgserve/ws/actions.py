"""The KataGo actions a /ws client may send, which act on its own connection's queries only.

`terminate` (`terminateId`, optional `turnNumbers`) and `terminate_all` (optional `turnNumbers`) are
acknowledged with the request echoed, as KataGo does; `query_version` is answered with the engine's version;
every other action gets an error line. A malformed terminate gets KataGo's own error line for the field.

Bounded whatever the client sends: the action's body is the one kgserve.katago.protocol.classify_line parsed
(no second parse, any depth); `turnNumbers` longer than `limits.max_turns_per_query` is refused with an error
line naming the cap (no query analyses more turns than that), and the turns are read as KataGo reads them
(`get<vector<int>>`: floats truncate, booleans count). Each query is sent a turn's terminate at most once, and
only for turns it analyses (kgserve.engine.stream.QueryStream.claim_turns).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kgserve.katago._nlohmann import nlohmann_int
from kgserve.katago.protocol import (
    KNOWN_ACTIONS,
    TERMINATE_ID_ERROR,
    TURN_NUMBERS_ERROR,
    Rejected,
    dump_compact,
    error_line,
)

__all__ = ["ACTIONS", "Terminate", "action_body", "terminate_request", "unavailable", "version_answer"]

ACTIONS = ("terminate", "terminate_all", "query_version")


@dataclass(frozen=True, slots=True)
class Terminate:
    target: str | None  # the caller id whose queries end (terminate), or None: all of them (terminate_all)
    turns: frozenset[int] | None  # only these turns of them, as KataGo reads them
    ack: bytes  # KataGo acknowledges with the request itself


def action_body(item: Rejected) -> dict[str, Any] | None:
    """The body of a line that is one of KataGo's actions (classify_line keeps it), None for any other line."""
    body = item.action
    if body is None or item.caller_id is None:
        return None
    return body if body.get("action") in KNOWN_ACTIONS else None


def unavailable(body: Mapping[str, Any]) -> bytes:
    message = f"kgserve: the '{body['action']}' action is not available here (only {', '.join(ACTIONS)})"
    return error_line(message, caller_id=body["id"], field="action")


def version_answer(body: Mapping[str, Any], version: str | None, git_hash: str | None) -> bytes:
    """KataGo's answer to query_version (the request with `version` and `git_hash` added)."""
    if version is None:
        return error_line("kgserve: no engine has started yet", caller_id=body["id"], field="action")
    return dump_compact({**body, "git_hash": git_hash or "", "version": version}).encode("utf-8")


def terminate_request(body: Mapping[str, Any], max_turns: int) -> Terminate | bytes:
    """What a terminate or terminate_all asks for, or the error line for a malformed or oversized one."""
    caller_id: str = body["id"]
    target: str | None = None
    if body["action"] == "terminate":
        target = body.get("terminateId")
        if not isinstance(target, str):
            return error_line(TERMINATE_ID_ERROR, caller_id=caller_id, field="terminateId")
    turns: frozenset[int] | None = None
    if "turnNumbers" in body:
        value = body["turnNumbers"]
        if not isinstance(value, list) or not all(type(turn) in (int, float, bool) for turn in value):
            return error_line(TURN_NUMBERS_ERROR, caller_id=caller_id, field="turnNumbers")
        if len(value) > max_turns:
            message = (
                f"kgserve: turnNumbers has {len(value)} entries, over the limit of {max_turns} "
                "(limits.max_turns_per_query: no query analyses more turns)"
            )
            return error_line(message, caller_id=caller_id, field="turnNumbers")
        turns = frozenset(nlohmann_int(turn) for turn in value)
    return Terminate(target, turns, dump_compact(body).encode("utf-8"))
