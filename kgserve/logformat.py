"""kgserve's log line format and handler: the timestamp's text made once per second, and a direct path for
the one INFO line every request writes.

`logging.Formatter.formatTime` converts and `strftime`s every record's time; at one access line per request
that is a few µs each, for the same text within a second. `SecondCachedFormatter` renders the second once
and only adds the milliseconds: the same text as the stock formatter (`2026-11-22 19:03:24,512`).

`LineHandler` is the stderr handler `python -m kgserve` installs. Besides logging's records it takes whole
INFO lines (`direct_handler` / `LineHandler.write_line`): the same text as a record would give, without the
LogRecord, the handler lock and one write plus flush per line (~12 µs a line measured, ~2 µs this way). The
lines of one event-loop turn go out in one write at the end of the turn; a record emitted meanwhile first
writes them, so the order in the stream is the order of the calls. The direct path is only taken when
nothing else could see a record (the logger chain has no other handler and no filter: a test's capture,
an embedding application's handler or a redactor make callers fall back to `logging`). `write_access_line` is
that path for the access lines of HTTP requests and WebSocket connections.

Lines other programs read: `listening_line` (`kgserve listening on http://HOST:PORT`, which kgbench, the
benchmarks and runtime/serve_analysis.sh wait for; `LISTENING_RE` reads it back).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import TextIO

__all__ = [
    "FORMAT",
    "LISTENING_RE",
    "LineHandler",
    "SecondCachedFormatter",
    "direct_handler",
    "listening_line",
    "write_access_line",
]

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LISTENING_RE = re.compile(r"kgserve listening on (http://\S+?):(\d+)\b")  # group 1: http://HOST, group 2: PORT
_access_log = logging.getLogger("kgserve.access")


def listening_line(url_host: str, port: int) -> str:
    """What kgserve logs once it accepts connections (`url_host`: an IPv6 address in brackets)."""
    return f"kgserve listening on http://{url_host}:{port}"


class SecondCachedFormatter(logging.Formatter):
    _second: int | None = None
    _text = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        return self.timestamp(record.created, record.msecs)

    def timestamp(self, created: float, msecs: float) -> str:
        """`formatTime`'s text for a time (seconds since the epoch, and its milliseconds as LogRecord has them)."""
        second = int(created)
        if second != self._second:
            record = logging.makeLogRecord({"created": created, "msecs": msecs})
            self._text = super().formatTime(record).rsplit(",", 1)[0]  # the stock text, without its msecs
            self._second = second
        return f"{self._text},{int(msecs):03d}"  # logging.Formatter.default_msec_format: "%s,%03d"


class LineHandler(logging.StreamHandler[TextIO]):
    """A StreamHandler with FORMAT that also takes pre-made INFO lines (see the module docstring)."""

    formatter: SecondCachedFormatter

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.setFormatter(SecondCachedFormatter(FORMAT))
        self._pending: list[str] = []
        self._flush_soon: asyncio.Handle | None = None

    def write_line(self, name: str, message: str) -> None:
        """Write `message` as an INFO record of logger `name` would be written (the caller checked the level)."""
        created = time.time()
        msecs = (created - int(created)) * 1000  # as LogRecord computes it (Python 3.11)
        self._pending.append(f"{self.formatter.timestamp(created, msecs)} INFO {name}: {message}\n")
        if self._flush_soon is None:
            try:
                self._flush_soon = asyncio.get_running_loop().call_soon(self.write_pending)
            except RuntimeError:  # no event loop: write it now
                self.write_pending()

    def write_pending(self) -> None:
        self._flush_soon = None
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending.clear()
        try:
            self.stream.write(text)
            self.stream.flush()
        except Exception:  # a log write never fails a request (Handler.handleError with raiseExceptions off)
            pass

    def emit(self, record: logging.LogRecord) -> None:
        self.write_pending()
        super().emit(record)

    def flush(self) -> None:
        self.write_pending()
        super().flush()

    def close(self) -> None:
        self.write_pending()
        if self._flush_soon is not None:
            self._flush_soon.cancel()
            self._flush_soon = None
        super().close()


def direct_handler(logger: logging.Logger) -> LineHandler | None:
    """The LineHandler an INFO line of `logger` can go to directly, or None: then log it through `logging`
    (also when INFO is off for it: the record is dropped there as usual).

    Direct only when the record would reach that one handler and nothing else: no handler or filter on the
    logger or its ancestors but the root's single LineHandler, propagation on all the way."""
    if not logger.isEnabledFor(logging.INFO):
        return None
    node: logging.Logger | None = logger
    while node is not None and node is not logging.root:
        if node.handlers or node.filters or not node.propagate:
            return None
        node = node.parent
    root = logging.root
    if len(root.handlers) != 1 or root.filters:
        return None
    handler = root.handlers[0]
    if type(handler) is not LineHandler or handler.filters or handler.level > logging.INFO:
        return None
    return handler


def write_access_line(line: str) -> None:
    """One access line (logger kgserve.access, INFO): straight to kgserve's stderr handler when nothing else
    could see the record (direct_handler), else through logging."""
    handler = direct_handler(_access_log)
    if handler is not None:
        handler.write_line(_access_log.name, line)
    else:
        _access_log.info("%s", line)
