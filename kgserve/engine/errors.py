"""The engine errors, shared by the engine, its query streams, the pool and the HTTP layer.

`EngineError` is the base: `EngineStartupError` (a process did not reach ready), `EngineDied` (it exited with
queries in flight), `AbortTimeout` (it did not answer a terminate in time) and `NoEngineReady` (the pool has
no ready engine to take a query).
"""

from __future__ import annotations

__all__ = ["AbortTimeout", "EngineDied", "EngineError", "EngineStartupError", "NoEngineReady"]


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
