"""What the batch command asks of a target (a kgserve URL, or the engine pool in this process): the `Target`
contract, and the `Plan` of how much to send at once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kgserve.batch.answers import Answer, RetryLater
from kgserve.batch.inputs import Row

__all__ = ["Plan", "Target", "TargetFailed"]


class TargetFailed(Exception):
    """The target cannot answer any row (bad credentials, an engine that does not start); the run stops."""


@dataclass(frozen=True)
class Plan:
    concurrency: int  # queries in flight
    group: int  # queries sent together (one HTTP request); concurrency / group requests at once
    why: str  # how the concurrency was found, for the start line

    @property
    def senders(self) -> int:
        return max(1, -(-self.concurrency // self.group))


class Target(Protocol):
    def describe(self) -> str: ...

    async def open(self) -> None: ...

    async def plan(self, concurrency: int | None) -> Plan: ...

    async def send_group(self, rows: Sequence[Row]) -> list[Answer | RetryLater]:
        """One result per row, in order: its answer for good, or why this attempt failed (may pass)."""
        ...

    async def close(self) -> float | None: ...  # the engines' NN rows, when they report them
