"""A tiny scripted stand-in for `katago analysis`, for tests that need exact bytes or exact timing.

Run as `python fake_engine.py analysis -config CFG -model MODEL`. Like KataGo it logs to stderr, prints
`Started, ready to begin handling requests`, answers query_version / query_models / terminate /
terminate_all, and writes one compact JSON line per response with the id it was sent.

Extra query fields steer it (never sent by real clients):
- "replay": path of a recorded `*.out.jsonl`: every line is written as recorded, with the recorded id
  value replaced by the id this query was sent with (so the caller's id restored = the recording).
- "fakeDelay": seconds before each turn's final line (default 0); "fakePad": bytes of padding in it.
- "fakeError": answer with one error line for the id; "fakeCrash": exit at once with this status.
- "fakeIgnoreTerminate": true: a terminate of this query is acknowledged but never finishes it.
Environment: FAKE_STARTUP_S (sleep before ready), FAKE_NEVER_READY=1, FAKE_IGNORE_EOF=1, FAKE_VERSION.
A missing -model file aborts like KataGo (stderr lines, exit status 134).
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from typing import Any

_out_lock = threading.Lock()
_pending: dict[str, dict[str, Any]] = {}
_pending_lock = threading.Lock()


def emit(line: str | bytes) -> None:
    data = line.encode() if isinstance(line, str) else line
    with _out_lock:
        sys.stdout.buffer.write(data + b"\n")
        sys.stdout.buffer.flush()


def log(text: str) -> None:
    sys.stderr.write(f"2026-11-22 05:27:07+0000: {text}\n")
    sys.stderr.flush()


def dump(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def final_line(qid: str, turn: int, pad: int, partial: bool = False) -> str:
    payload: dict[str, Any] = {"id": qid, "isDuringSearch": False, "moveInfos": [], "turnNumber": turn}
    if pad:
        payload["pad"] = "x" * pad
    if partial:
        payload["terminated"] = True
    return dump(payload)


def run_query(query: dict[str, Any]) -> None:
    qid = query["id"]
    if "replay" in query:
        with open(query["replay"], "rb") as handle:
            for raw in handle.read().splitlines():
                emit(re.sub(rb'"id":"[^"]*"', b'"id":"' + qid.encode() + b'"', raw, count=1))
        return
    if "fakeError" in query:
        emit(dump({"error": str(query["fakeError"]), "field": "fakeError", "id": qid}))
        return
    turns = query.get("analyzeTurns") or [len(query.get("moves") or [])]
    state: dict[str, Any] = {
        "terminated": False,
        "ignore": bool(query.get("fakeIgnoreTerminate")),
        "event": threading.Event(),
    }
    with _pending_lock:
        _pending[qid] = state
    delay = float(query.get("fakeDelay", 0))
    for turn in sorted(set(turns)):
        if delay and not state["terminated"]:
            state["event"].wait(delay)
        if state["terminated"] and not state["ignore"]:
            emit(final_line(qid, turn, 0, partial=True))
        elif state["terminated"]:
            return
        else:
            emit(final_line(qid, turn, int(query.get("fakePad", 0))))
    with _pending_lock:
        _pending.pop(qid, None)


def handle(line: str) -> None:
    query = json.loads(line)
    action = query.get("action")
    if action == "query_version":
        version = os.environ.get("FAKE_VERSION", "1.17.2-fake")
        emit(dump({"action": action, "git_hash": "fake", "id": query["id"], "version": version}))
    elif action == "query_models":
        emit(dump({"action": action, "id": query["id"], "models": [{"name": os.path.basename(MODEL)}]}))
    elif action in ("terminate", "terminate_all"):
        ack = {"action": action, "id": query["id"]}
        if action == "terminate":
            ack["terminateId"] = query["terminateId"]
        emit(dump(ack))
        with _pending_lock:
            targets = [s for k, s in _pending.items() if action == "terminate_all" or k == query.get("terminateId")]
        for state in targets:
            state["terminated"] = True
            state["event"].set()
    elif "fakeCrash" in query:
        log("crashing as asked")
        os._exit(int(query["fakeCrash"]))
    else:
        threading.Thread(target=run_query, args=(query,), daemon=True).start()


def main(argv: list[str]) -> int:
    global MODEL
    MODEL = argv[argv.index("-model") + 1] if "-model" in argv else "model.bin.gz"
    log("Analysis Engine starting...")
    log("KataGo v1.17.2 (fake)")
    if not os.path.exists(MODEL):
        sys.stderr.write("terminate called after throwing an instance of 'StringError'\n")
        sys.stderr.write(f"  what():  Error loading or parsing model file {MODEL}: Could not open file {MODEL}\n")
        sys.stderr.flush()
        return 134
    time.sleep(float(os.environ.get("FAKE_STARTUP_S", "0")))
    if os.environ.get("FAKE_NEVER_READY"):
        time.sleep(3600)
    log("Started, ready to begin handling requests")
    for raw in sys.stdin:
        if raw.strip():
            handle(raw)
    if os.environ.get("FAKE_IGNORE_EOF"):  # a busy engine that does not notice its input is gone
        time.sleep(3600)
    deadline = time.monotonic() + 5  # like KataGo at end of input: let running queries finish
    while _pending and time.monotonic() < deadline:
        time.sleep(0.01)
    log("NN rows: 1")
    return 0


MODEL = ""

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
