"""A row's answer: the lines that go to the output (KataGo's final analysis lines, or its error line), what error
it ended in, and the rules that decide whether an attempt is worth repeating.

Only `isDuringSearch: false` lines and error lines are kept: partial lines (`reportDuringSearchEvery`) are dropped.
A row the command gives up on gets an error line of its own naming why (`gave_up`), never an empty object.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass

from kgserve.engine.errors import SHUTDOWN_TEXT
from kgserve.katago.protocol import error_line, line_kind, locate_id

__all__ = ["Answer", "Backoff", "RetryLater", "answer_of", "error_kind", "gave_up", "keep_lines"]

# error texts kgserve writes for a query it could not finish through no fault of the query: try it again
_TRANSIENT = ("engine died before finishing this query", SHUTDOWN_TEXT, "no engine is ready")


class RetryLater(Exception):
    """This attempt failed for a reason that may pass (a busy or restarting server, a dead engine)."""

    def __init__(self, reason: str, retry_after_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after_s = retry_after_s


@dataclass(frozen=True, slots=True)
class Answer:
    lines: tuple[bytes, ...]
    error: str | None = None  # the error kind, when the row ended in an error line


@dataclass(frozen=True)
class Backoff:
    """Exponential back-off with full jitter (clients retrying together spread out); a server's Retry-After is
    honoured, with up to a quarter more at random for the same reason."""

    base_s: float = 0.25
    cap_s: float = 10.0

    def delay(self, attempt: int, retry_after_s: float | None = None) -> float:
        if retry_after_s is not None and retry_after_s >= 0:
            return retry_after_s * (1.0 + random.random() / 4)
        return random.uniform(0.0, min(self.cap_s, self.base_s * 2 ** min(attempt, 30)))


def keep_lines(lines: Iterable[bytes]) -> list[bytes]:
    """The final analysis lines and the error lines, in the order written."""
    kept = []
    for line in lines:
        span = locate_id(line)
        kind = line_kind(line, span[1]) if span is not None else ("error" if line.startswith(b'{"error"') else "")
        if kind in ("final", "error") or (kind == "other" and b'"error":' in line[:12]):
            kept.append(line)
    return kept


def error_kind(line: bytes) -> str | None:
    """An error line's kind for the summary: `field: text` (KataGo's error text, at most 100 characters)."""
    if not line.startswith(b'{"error"') and not line.startswith(b'{"field"'):
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if not isinstance(value, dict) or "error" not in value:
        return None
    text = str(value["error"])[:100]
    return f"{value['field']}: {text}" if value.get("field") else text


def _transient(lines: Iterable[bytes]) -> str | None:
    for line in lines:
        kind = error_kind(line)
        if kind is not None and any(word in kind for word in _TRANSIENT):
            return kind
    return None


def answer_of(lines: list[bytes], finals: int = 1) -> Answer:
    """A row's answer from the lines the target returned; RetryLater when kgserve cut the query short (its engine
    died, kgserve shut down) or fewer final lines came than the query asks for."""
    kept = keep_lines(lines)
    if (reason := _transient(kept)) is not None:
        raise RetryLater(reason)
    errors = [kind for line in kept if (kind := error_kind(line)) is not None]
    if not errors and len(kept) < finals:
        raise RetryLater(f"the answer ended after {len(kept)} of {finals} final lines")
    return Answer(tuple(kept), errors[0] if errors else None)


def gave_up(caller_id: str | None, attempts: int, reason: str) -> Answer:
    kind = f"batch: gave up after {attempts} attempts"
    return Answer((error_line(f"{kind}: {reason}", caller_id=caller_id),), kind)
