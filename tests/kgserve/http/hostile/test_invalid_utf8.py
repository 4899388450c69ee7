"""Lines a real KataGo aborts on (SIGABRT) are answered by kgserve itself, over HTTP and over WebSocket (issue 27).

KataGo v1.17.2 quotes an unparsable line back in its error (`... could not parse input line as json request:
LINE`); when that text is not valid UTF-8, nlohmann's dump() throws (type_error 316) and the engine aborts,
losing every query in flight. Two kinds of lines do that: invalid UTF-8 anywhere, and valid UTF-8 whose parse
stops inside a multi-byte character (`[é]`: the lexer quotes the lead byte alone as the last token read).
kgserve classifies every line before an engine sees it: such a line gets KataGo's error text (the bad bytes as
U+FFFD), never reaches an engine, and the queries around it are answered.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from tests.conftest import analysis_query

pytestmark = pytest.mark.slow

PARSE_ERROR = "[json.exception.parse_error.101] parse error at line 1, column "
COULD_NOT_PARSE = " - could not parse input line as json request: "
ABORTING_LINES = [
    (b'{"id":"x\xff","moves":[]}', "invalid string: ill-formed UTF-8 byte; last read: '\"x\ufffd'"),
    (b"\xff\xfe", "invalid literal; last read: '\ufffd'"),
    (b'{"id":"a","moves":[],"x":\xc3}', "invalid literal; last read: '\"x\":\ufffd'"),
    (b"[\xc3\xa9]", "invalid literal; last read: '[\ufffd'"),  # valid UTF-8: KataGo aborts all the same
    (b'{"id":"a","x":tru\xe2\x82\xac}', "invalid literal; last read: '\"x\":tru\ufffd'"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, config_writer: Any, kgserve_process: Any) -> Iterator[Any]:
    process = kgserve_process(config_writer(tmp_path_factory.mktemp("kgserve")), {"KGSERVE_SIM_SPEED": "200"})
    process.wait_listening()
    process.wait_ready()
    process.first_engine_pids = process.child_pids()
    yield process
    process.stop()


def _good(caller_id: str) -> bytes:
    return json.dumps(analysis_query(caller_id, moves=[["B", "Q4"]], max_visits=5)).encode()


def _assert_katagos_error(answer: dict[str, Any], line: bytes, detail: str) -> None:
    assert set(answer) == {"error"}, answer
    text = answer["error"]
    assert text.startswith(PARSE_ERROR) and detail in text, text
    assert text.endswith(COULD_NOT_PARSE + line.decode("utf-8", errors="replace"))


@pytest.mark.parametrize(("line", "detail"), ABORTING_LINES)
def test_http_answers_a_line_katago_aborts_on(server: Any, line: bytes, detail: str) -> None:
    alone = httpx.post(server.url + "/analysis", content=line, timeout=30)
    assert alone.status_code == 400, alone.text
    (answer,) = [json.loads(text) for text in alone.content.splitlines()]
    _assert_katagos_error(answer, line, detail)
    mixed = httpx.post(server.url + "/analysis", content=_good("before") + b"\n" + line + b"\n" + _good("after"))
    assert mixed.status_code == 200, mixed.text
    answers = [json.loads(text) for text in mixed.content.splitlines()]
    assert sorted(a["id"] for a in answers if a.get("isDuringSearch") is False) == ["after", "before"]
    (error,) = [a for a in answers if "error" in a]
    _assert_katagos_error(error, line, detail)


async def test_websocket_answers_lines_katago_aborts_on_and_stays_open(server: Any) -> None:
    async with connect(server.url.replace("http://", "ws://") + "/ws", max_size=None, open_timeout=30) as ws:
        for line, detail in ABORTING_LINES:
            await ws.send(line)  # a binary message: any bytes (a text message must be UTF-8)
            _assert_katagos_error(json.loads(await asyncio.wait_for(ws.recv(), 30)), line, detail)
        await ws.send("[\u00e9]")  # the same as a text message
        _assert_katagos_error(json.loads(await asyncio.wait_for(ws.recv(), 30)), "[é]".encode(), "last read: '[\ufffd'")
        await ws.send(_good("still-open"))
        answer = json.loads(await asyncio.wait_for(ws.recv(), 30))
        assert answer["id"] == "still-open" and answer["isDuringSearch"] is False


# over kgserve.admission.checks.OFF_LOOP_BYTES: classified on the parse thread, not the event loop
BIG_ABORTING = b'{"id":"x\xff","pad":"' + b"a" * 70_000 + b'"}'
DEEP = b"[" * 300_000 + b"]" * 300_000  # valid JSON nested 300,000 deep: not an object


def test_http_answers_big_lines_katago_aborts_on_off_the_event_loop(server: Any) -> None:
    alone = httpx.post(server.url + "/analysis", content=BIG_ABORTING, timeout=60)
    assert alone.status_code == 400, alone.text[:300]
    (answer,) = [json.loads(text) for text in alone.content.splitlines()]
    _assert_katagos_error(answer, BIG_ABORTING, ABORTING_LINES[0][1])
    deep = httpx.post(server.url + "/analysis", content=DEEP, timeout=60)
    assert deep.status_code == 400 and "valid json but was not an object" in deep.json()["error"]


async def test_websocket_answers_big_and_deep_lines_and_stays_open(server: Any) -> None:
    async with connect(server.url.replace("http://", "ws://") + "/ws", max_size=None, open_timeout=30) as ws:
        await ws.send(BIG_ABORTING)
        _assert_katagos_error(json.loads(await asyncio.wait_for(ws.recv(), 60)), BIG_ABORTING, ABORTING_LINES[0][1])
        await ws.send(DEEP)  # a RecursionError in the action check closed the connection before issue 27
        answer = json.loads(await asyncio.wait_for(ws.recv(), 60))
        assert set(answer) == {"error"} and "valid json but was not an object" in answer["error"]
        await ws.send(b'{"id":"deep","action":' + DEEP + b"}")
        answer = json.loads(await asyncio.wait_for(ws.recv(), 60))
        assert answer["id"] == "deep" and "error" in answer  # a non-string action: KataGo analyses it (and refuses)
        await ws.send(_good("still-open"))
        answer = json.loads(await asyncio.wait_for(ws.recv(), 60))
        assert answer["id"] == "still-open" and answer["isDuringSearch"] is False


def test_the_engine_never_saw_them(server: Any) -> None:
    """Runs last in this module: the engine that started is still the one serving, never restarted."""
    (pid,) = server.first_engine_pids
    engine = httpx.get(server.url + "/readyz", timeout=10).json()["engines"][0]
    assert engine["pid"] == pid and engine["restarts"] == 0
