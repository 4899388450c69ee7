"""HTTP's own bounds for POST /analysis: the body, read within `limits.max_body_bytes`, and the deadline header.

- body over `limits.max_body_bytes` -> 413 (checked on Content-Length first, then while reading);
- the request deadline is `limits.deadline_s`, or less when the client sends `X-Deadline-Ms`.

The per-query checks and the in-flight bound, which /ws shares, are in kgserve.admission.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kgserve.settings import LimitsSettings

__all__ = ["BadRequestHeader", "BodyTooLarge", "ClientGone", "OverBudget", "deadline_seconds", "read_limited"]


class BodyTooLarge(Exception):
    """The request body is over limits.max_body_bytes."""


class BadRequestHeader(Exception):
    """A request header kgserve reads holds an unusable value."""


class ClientGone(Exception):
    """The client left (or was cut off) before its whole body arrived."""


class OverBudget(Exception):
    """A body without a Content-Length passed the memory budget while it was read (kgserve.admission.budget)."""


Receive = Callable[[], Awaitable[Mapping[str, Any]]]  # an ASGI receive callable


async def read_limited(
    content_length: bytes | str | None,
    receive: Receive,
    max_bytes: int,
    reserve: Callable[[int], bool] | None = None,
) -> bytes:
    """The whole body of an ASGI request, or BodyTooLarge as soon as it is known to be over `max_bytes`;
    `reserve(size)` is asked for each chunk (False: OverBudget)."""
    if content_length is not None:
        try:
            declared = int(content_length)
        except ValueError:
            declared = -1
        if declared > max_bytes:
            raise BodyTooLarge(f"Content-Length {declared} is over the limit of {max_bytes} bytes")
    parts: list[bytes] = []
    total = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk: bytes = message.get("body", b"")
        total += len(chunk)
        if total > max_bytes:
            raise BodyTooLarge(f"request body is over the limit of {max_bytes} bytes")
        if reserve is not None and chunk and not reserve(len(chunk)):
            raise OverBudget
        parts.append(chunk)
        if not message.get("more_body", False):
            return parts[0] if len(parts) == 1 else b"".join(parts)


def deadline_seconds(header: str | None, limits: LimitsSettings) -> float:
    """The request's deadline: the config's, or the client's X-Deadline-Ms when shorter."""
    if header is None:
        return limits.deadline_s
    try:
        millis = float(header.strip())
    except ValueError:
        raise BadRequestHeader(f"X-Deadline-Ms must be a positive number of milliseconds, got {header!r}") from None
    if not millis > 0 or millis != millis or millis == float("inf"):
        raise BadRequestHeader(f"X-Deadline-Ms must be a positive number of milliseconds, got {header!r}")
    return min(limits.deadline_s, millis / 1000.0)
