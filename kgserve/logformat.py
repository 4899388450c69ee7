"""kgserve's log line format, with the timestamp's text made once per second instead of once per line.

`logging.Formatter.formatTime` converts and `strftime`s every record's time; at one access line per request
that is a few µs each, for the same text within a second. `SecondCachedFormatter` renders the second once
and only adds the milliseconds: the same text as the stock formatter (`2026-11-22 19:03:24,512`).
"""

from __future__ import annotations

import logging

__all__ = ["FORMAT", "SecondCachedFormatter"]

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class SecondCachedFormatter(logging.Formatter):
    _second: int | None = None
    _text = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        if second != self._second:
            self._text = super().formatTime(record).rsplit(",", 1)[0]  # the stock text, without its msecs
            self._second = second
        return f"{self._text},{int(record.msecs):03d}"  # logging.Formatter.default_msec_format: "%s,%03d"
