"""kgserve's log formatter renders each second once and writes the same text as logging's own."""

from __future__ import annotations

import logging

from kgserve.logformat import FORMAT, SecondCachedFormatter


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
