"""The KataGo actions a /ws client may send, which act on its own connection's queries only.

`terminate` (`terminateId`, optional `turnNumbers`) and `terminate_all` (optional `turnNumbers`) are
acknowledged with the request echoed, as KataGo does; `query_version` is answered with the engine's version;
every other action gets an error line. A malformed terminate gets KataGo's own error line for the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kgserve.katago.protocol import KNOWN_ACTIONS, TERMINATE_ID_ERROR, TURN_NUMBERS_ERROR, dump_compact, error_line

__all__ = ["ACTIONS", "Terminate", "known_action", "terminate_request", "unavailable", "version_answer"]

ACTIONS = ("terminate", "terminate_all", "query_version")


@dataclass(frozen=True, slots=True)
class Terminate:
    target: str | None  # the caller id whose queries end (terminate), or None: all of them (terminate_all)
    turns: list[int] | None  # only these turns of them
    ack: bytes  # KataGo acknowledges with the request itself


def known_action(line: bytes) -> dict[str, Any] | None:
    """The line's body when it is one of KataGo's actions with a string id; None otherwise (its error stands)."""
    try:
        body = json.loads(line)
    except ValueError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get("id"), str):
        return None
    action = body.get("action")
    return body if isinstance(action, str) and action in KNOWN_ACTIONS else None


def unavailable(body: Mapping[str, Any]) -> bytes:
    message = f"kgserve: the '{body['action']}' action is not available here (only {', '.join(ACTIONS)})"
    return error_line(message, caller_id=body["id"], field="action")


def version_answer(body: Mapping[str, Any], version: str | None, git_hash: str | None) -> bytes:
    """KataGo's answer to query_version (the request with `version` and `git_hash` added)."""
    if version is None:
        return error_line("kgserve: no engine has started yet", caller_id=body["id"], field="action")
    return dump_compact({**body, "git_hash": git_hash or "", "version": version}).encode("utf-8")


def terminate_request(body: Mapping[str, Any]) -> Terminate | bytes:
    """What a terminate or terminate_all asks for, or KataGo's error line for a malformed one."""
    caller_id: str = body["id"]
    target: str | None = None
    if body["action"] == "terminate":
        target = body.get("terminateId")
        if not isinstance(target, str):
            return error_line(TERMINATE_ID_ERROR, caller_id=caller_id, field="terminateId")
    turns: list[int] | None = None
    if "turnNumbers" in body:
        value = body["turnNumbers"]
        if not isinstance(value, list) or not all(type(turn) in (int, float, bool) for turn in value):
            return error_line(TURN_NUMBERS_ERROR, caller_id=caller_id, field="turnNumbers")
        turns = [int(turn) for turn in value]
    return Terminate(target, turns, dump_compact(body).encode("utf-8"))
