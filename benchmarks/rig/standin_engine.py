"""BENCHMARK STAND-IN for KataGo's analysis engine: canned answers at (nearly) zero CPU. Not an engine.

``python -m benchmarks.rig.standin_engine analysis -config CFG -model MODEL`` (the argv kgserve gives any
backend). benchmarks.hotpath runs kgserve on it so that, on a machine with few cores, the engine's own
CPU does not compete with kgserve's: the sim at ``KGSERVE_SIM_FIXED_RPS=0`` has no delay but replays every
game on a board (~600 µs of CPU per query), as much as kgserve itself spends.

It speaks the protocol kgserve relies on: KataGo's ready line on stderr, ``query_version``/``query_models``,
``terminate``/``terminate_all`` acknowledgements, and for every query one final answer per analysed turn,
with the query's id and turn number. The answer is a real KataGo v1.17.2 answer
(assets/analysis/outputs/midgame_19x19.jsonl) cut to the query's shape: ``min(maxVisits, 11)`` moveInfos,
and ``ownership``/``policy`` only when the query asks for them. It does not look at the position: the
numbers belong to another board. Answers go out in the order the queries came in, at once.
"""

from __future__ import annotations

import json
import sys
import time
from functools import lru_cache
from typing import Any, BinaryIO

from kgserve.katago.protocol import READY_LINE
from kgserve.paths import PROJECT_ROOT

__all__ = ["SOURCE", "answer_lines", "main"]

SOURCE = PROJECT_ROOT / "assets" / "analysis" / "outputs" / "midgame_19x19.jsonl"
VERSION = "1.17.2-standin"


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


@lru_cache(maxsize=1)
def _real_answer() -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(SOURCE.read_text(encoding="utf-8").splitlines()[0])
    return answer


@lru_cache(maxsize=256)
def _middle(visits: int, ownership: bool, policy: bool) -> bytes:
    """The answer between its id and its turn number, for one query shape (rendered once per shape)."""
    real = _real_answer()
    body: dict[str, Any] = {"isDuringSearch": False, "moveInfos": real["moveInfos"][: max(1, min(visits, 11))]}
    if ownership:
        body["ownership"] = real["ownership"]
    if policy:
        body["policy"] = real["policy"]
    body["rootInfo"] = real["rootInfo"]
    return _compact(body)[1:-1]  # without the braces: the id goes before, the turn number after


def answer_lines(query: dict[str, Any]) -> list[bytes]:
    """One final answer line per analysed turn of ``query`` (no newline)."""
    visits = query.get("maxVisits", 1)
    middle = _middle(
        visits if isinstance(visits, int) else 1,
        query.get("includeOwnership") is True,
        query.get("includePolicy") is True,
    )
    turns = query.get("analyzeTurns")
    if not isinstance(turns, list):
        moves = query.get("moves")
        turns = [len(moves) if isinstance(moves, list) else 0]
    head = b'{"id":' + _compact(query.get("id")) + b","
    return [head + middle + b',"turnNumber":' + str(turn).encode() + b"}" for turn in turns]


def _action(query: dict[str, Any]) -> bytes:
    action = query["action"]
    if action == "query_version":
        return _compact({"action": action, "git_hash": "standin", "id": query.get("id"), "version": VERSION})
    if action == "query_models":
        model = {"internalName": "standin", "maxBatchSize": 1, "name": "standin", "version": 0}
        return _compact({"action": action, "id": query.get("id"), "models": [model]})
    return _compact(query)  # terminate, terminate_all, clear_cache: KataGo echoes them; nothing is running


def serve(stdin: BinaryIO, stdout: BinaryIO) -> None:
    for raw in stdin:
        try:
            query = json.loads(raw)
        except ValueError as exc:
            stdout.write(_compact({"error": f"Could not parse json: {exc}"}) + b"\n")
        else:
            lines = [_action(query)] if "action" in query else answer_lines(query)
            stdout.write(b"\n".join(lines) + b"\n")
        stdout.flush()


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "analysis":
        print("usage: python -m benchmarks.rig.standin_engine analysis [-config CFG -model MODEL]", file=sys.stderr)
        return 2
    _real_answer()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S+0000", time.gmtime())
    sys.stderr.write(f"{stamp}: KataGo v{VERSION} (BENCHMARK STAND-IN: canned answers, no search)\n")
    sys.stderr.write(f"{stamp}: {READY_LINE}\n")
    sys.stderr.flush()
    serve(sys.stdin.buffer, sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
