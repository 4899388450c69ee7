"""kgserve's log formatter renders each second once and writes the same text as logging's own; access lines take
a direct path to kgserve's own stderr handler only when nothing else could see their records."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
from collections.abc import Iterator

import pytest

from kgserve import logformat
from kgserve.http import access
from kgserve.logformat import FORMAT, LineHandler, SecondCachedFormatter, direct_handler, write_access_line


def _record(created: float) -> logging.LogRecord:
    record = logging.LogRecord("kgserve.http.access", logging.INFO, "", 0, "request id=%s", ("abc",), None)
    record.created = created
    record.msecs = float(int((created - int(created)) * 1000))
    return record


def test_same_text_as_the_stock_formatter_across_seconds() -> None:
    stock, cached = logging.Formatter(FORMAT), SecondCachedFormatter(FORMAT)
    times = [1_700_000_000 + step * 0.37 for step in range(30)] + [1_700_000_099.9995, 1_700_000_100.0004]
    for created in times:
        assert cached.format(_record(created)) == stock.format(_record(created))
    assert cached.formatTime(_record(times[0]), "%H") == stock.formatTime(_record(times[0]), "%H")


class _CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


@contextlib.contextmanager
def plain_root() -> Iterator[tuple[LineHandler, _CountingStream]]:
    """The root logger as `python -m kgserve` sets it up: one LineHandler, INFO (restored afterwards). Entered
    inside the test's body: pytest adds its capturing handlers to the root for the call phase."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.filters[:], root.level)
    stream = _CountingStream()
    handler = LineHandler(stream)
    root.handlers[:] = [handler]
    root.filters[:] = []
    root.setLevel(logging.INFO)
    try:
        yield handler, stream
    finally:
        root.handlers[:], root.filters[:] = saved[0], saved[1]
        root.setLevel(saved[2])


def test_a_direct_line_has_the_text_of_a_record(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logformat.time, "time", lambda: 1_700_000_123.4567)  # the time module: LogRecord's too
    with plain_root() as (_handler, stream):
        write_access_line("request id=abc status=200")
    record = logging.LogRecord("kgserve.access", logging.INFO, "", 0, "request id=%s", ("abc status=200",), None)
    assert stream.getvalue() == logging.Formatter(FORMAT).format(record) + "\n"


def test_direct_only_when_nothing_else_sees_the_record() -> None:
    access = logging.getLogger("kgserve.access")
    with plain_root() as (handler, stream):
        assert direct_handler(access) is handler
        other = logging.Handler()
        logging.getLogger("kgserve").addHandler(other)  # e.g. pytest's caplog, an application's handler
        try:
            assert direct_handler(access) is None
        finally:
            logging.getLogger("kgserve").removeHandler(other)
        redactor = logging.Filter("x")
        access.addFilter(redactor)
        try:
            assert direct_handler(access) is None
        finally:
            access.removeFilter(redactor)
        logging.getLogger().setLevel(logging.WARNING)  # access lines off
        assert direct_handler(access) is None
        write_access_line("request id=off")
        assert stream.getvalue() == ""


def test_access_line_goes_through_logging_when_captured(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="kgserve.access"):
        write_access_line("request id=captured status=200")
    assert [r.getMessage() for r in caplog.records if r.name == "kgserve.access"] == ["request id=captured status=200"]


def test_lines_of_one_loop_turn_go_out_in_one_write_and_in_order() -> None:
    async def scenario(stream: _CountingStream) -> None:
        write_access_line("request id=one")
        write_access_line("request id=two")
        assert stream.writes == 0  # held until the end of this loop turn
        await asyncio.sleep(0)
        assert stream.writes == 1
        write_access_line("request id=three")
        logging.getLogger("kgserve").warning("a record in between")  # writes the held line first
        await asyncio.sleep(0)

    with plain_root() as (_handler, stream):
        asyncio.run(scenario(stream))
    lines = stream.getvalue().splitlines()
    assert [line.split(": ", 1)[1] for line in lines] == [
        "request id=one",
        "request id=two",
        "request id=three",
        "a record in between",
    ]
    assert " INFO kgserve.access: " in lines[0] and " WARNING kgserve: " in lines[3]


def test_without_an_event_loop_a_line_is_written_at_once() -> None:
    with plain_root() as (_handler, stream):
        write_access_line("request id=now")
        assert stream.getvalue().endswith("INFO kgserve.access: request id=now\n")


def test_log_values_are_made_safe_the_same_way_every_time() -> None:
    for _ in range(2):  # the second time from the cache of short texts
        assert access.log_safe("/analysis") == "/analysis"
        assert access.log_safe("POST") == "POST"
        assert access.log_safe("a b=c\n\u00e9") == "a%20b%3Dc%0A%C3%A9"
        assert access.log_safe(12) == "12"
    for index in range(2 * access._SAFE_TEXT_MAX):  # a client sending ever new paths does not grow the cache
        assert access.log_safe(f"/x y{index}") == f"/x%20y{index}"
    assert len(access._SAFE_TEXT) <= access._SAFE_TEXT_MAX
