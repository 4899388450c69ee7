"""Keep a WebSocket `token` query parameter out of the logs.

uvicorn logs every WebSocket handshake with its path and query string ('"WebSocket /ws?token=..."
[accepted]', logger "uvicorn.error"); clients that cannot send headers (KaTrain) put the bearer token
there. This filter rewrites such records with the value replaced by `<redacted>`.
"""

from __future__ import annotations

import logging
import re

__all__ = ["TokenRedactor", "install_redactor", "redact"]

_TOKEN = re.compile(r"([?&;]token=)[^&\s\"']*", re.IGNORECASE)
REDACTED = "<redacted>"


def redact(text: str) -> str:
    return _TOKEN.sub(lambda match: match.group(1) + REDACTED, text)


class TokenRedactor(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg = cleaned
            record.args = None
        return True


def install_redactor(logger_name: str = "uvicorn.error") -> None:
    """Add the filter to `logger_name` once (create_app may run many times in one process)."""
    logger = logging.getLogger(logger_name)
    if not any(isinstance(existing, TokenRedactor) for existing in logger.filters):
        logger.addFilter(TokenRedactor())
