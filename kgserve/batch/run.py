"""One pass over the rows: those the journal lacks go to the target, `concurrency` at a time, and each answer is
journalled as it arrives. A row is tried until it has an answer for good or `max_attempts` attempts have failed
for reasons that may pass (then its answer is an error line saying why): no row is dropped."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Protocol

from kgserve.batch.answers import Answer, Backoff, RetryLater, error_kind, gave_up
from kgserve.batch.inputs import Row
from kgserve.batch.journal import Journal
from kgserve.batch.progress import Progress

__all__ = ["Target", "answer_rows"]


class Target(Protocol):
    def describe(self) -> str: ...

    async def open(self) -> None: ...

    async def concurrency(self) -> tuple[int, str]: ...  # and how it was found

    async def send(self, row: Row) -> Answer: ...

    async def close(self) -> float | None: ...  # the engines' NN rows, when they report them


async def _answer(target: Target, row: Row, max_attempts: int, backoff: Backoff, progress: Progress) -> Answer:
    reason = "no attempt"
    for attempt in range(max_attempts):
        try:
            return await target.send(row)
        except RetryLater as exc:
            reason = exc.reason
            progress.retried(reason)
            if attempt + 1 < max_attempts:
                await asyncio.sleep(backoff.delay(attempt, exc.retry_after_s))
    return gave_up(row.caller_id, max_attempts, reason)


async def answer_rows(
    rows: Iterable[Row],
    target: Target,
    journal: Journal,
    progress: Progress,
    *,
    concurrency: int,
    max_attempts: int,
    backoff: Backoff | None = None,
) -> None:
    backoff = backoff or Backoff()
    queue: asyncio.Queue[Row | None] = asyncio.Queue(maxsize=2 * concurrency)

    async def produce() -> None:
        for row in rows:
            if row.index in journal.done:
                continue
            if row.rejected is not None:  # KataGo's own error line for this input line: nothing to send
                journal.record(row.index, Answer((row.rejected,), error_kind(row.rejected)))
                progress.advance(error=True, sent=False)
                continue
            await queue.put(row)
        for _ in range(concurrency):
            await queue.put(None)

    async def work() -> None:
        while (row := await queue.get()) is not None:
            answer = await _answer(target, row, max_attempts, backoff, progress)
            journal.record(row.index, answer)
            progress.advance(error=answer.error is not None)

    tasks = [asyncio.create_task(produce()), *(asyncio.create_task(work()) for _ in range(concurrency))]
    try:
        # the first failure (TargetFailed) ends the pass; the rows answered so far are in the journal
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
