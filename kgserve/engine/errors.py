"""The engine errors, shared by the engine, its query streams, the pool and the front ends (which tell a client
about them with `failure_text`).

`EngineError` is the base: `EngineStartupError` (a process did not reach ready), `EngineDied` (it exited with
queries in flight), `AbortTimeout` (it did not answer a terminate in time) and `NoEngineReady` (the pool has
no ready engine to take a query). `SHUTDOWN_TEXT`: the error line of a query kgserve itself ends when it shuts
down, the same over HTTP and WebSocket.
"""

from __future__ import annotations

__all__ = [
    "SHUTDOWN_TEXT",
    "AbortTimeout",
    "EngineDied",
    "EngineError",
    "EngineStartupError",
    "NoEngineReady",
    "exit_how",
    "failure_text",
]

SHUTDOWN_TEXT = "kgserve is shutting down: this query was terminated"


class EngineError(Exception):
    """Base of the engine errors."""


class EngineStartupError(EngineError):
    def __init__(self, message: str, *, exit_code: int | None = None, stderr_tail: list[str] | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.stderr_tail = list(stderr_tail or [])


class EngineDied(EngineError):
    def __init__(self, message: str, *, exit_code: int | None = None, stderr_tail: list[str] | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.stderr_tail = list(stderr_tail or [])


class AbortTimeout(EngineError):
    """The engine did not answer a terminate in time; the query is given up."""


class NoEngineReady(EngineError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def exit_how(code: int) -> str:
    """How a process ended, from its exit status (negative: the signal that killed it)."""
    return f"killed by signal {-code}" if code < 0 else f"exit status {code}"


def failure_text(exc: BaseException) -> str:
    """The error line text a client gets for a query whose stream failed (EngineDied and friends).

    The engine's stderr lines stay in kgserve's log: they may hold other clients' queries."""
    if isinstance(exc, EngineDied):
        code = exc.exit_code
        return "engine died before finishing this query" + ("" if code is None else f": {exit_how(code)}")
    return f"kgserve: this query failed: {type(exc).__name__}"
