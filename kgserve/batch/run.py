"""One pass over the rows: those the journal lacks go to the target as the plan says (`senders` at once, each a
group of up to `group` rows), and each answer is journalled as it arrives. A row is tried until it has an answer
for good or `max_attempts` attempts have failed for reasons that may pass (then its answer is an error line
saying why): no row is dropped. A sender tries its group's failed rows again, after the back-off, before it takes
new ones."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from kgserve.batch.answers import Answer, Backoff, error_kind, gave_up
from kgserve.batch.inputs import Row
from kgserve.batch.journal import Journal
from kgserve.batch.plan import Plan, Target
from kgserve.batch.progress import Progress

__all__ = ["answer_rows"]


async def _take(queue: asyncio.Queue[Row | None], most: int) -> list[Row]:
    """Up to `most` rows: waits for the first, takes what is there besides; [] at the end of the rows."""
    first = await queue.get()
    if first is None:
        queue.put_nowait(None)  # the end mark stays for the other senders
        return []
    group = [first]
    while len(group) < most:
        try:
            row = queue.get_nowait()
        except asyncio.QueueEmpty:
            break
        if row is None:
            queue.put_nowait(None)  # the end mark stays for the other senders
            break
        group.append(row)
    return group


async def answer_rows(
    rows: Iterable[Row],
    target: Target,
    journal: Journal,
    progress: Progress,
    *,
    plan: Plan,
    max_attempts: int,
    backoff: Backoff | None = None,
) -> None:
    backoff = backoff or Backoff()
    queue: asyncio.Queue[Row | None] = asyncio.Queue(maxsize=2 * plan.concurrency)

    async def produce() -> None:
        for row in rows:
            if row.index in journal.done:
                continue
            if row.rejected is not None:  # KataGo's own error line for this input line: nothing to send
                journal.record(row.index, Answer((row.rejected,), error_kind(row.rejected)))
                progress.advance(error=True, sent=False)
                continue
            await queue.put(row)
        await queue.put(None)

    def settle(row: Row, answer: Answer) -> None:
        journal.record(row.index, answer)
        progress.advance(error=answer.error is not None)

    async def send() -> None:
        while group := await _take(queue, plan.group):
            attempts = dict.fromkeys((row.index for row in group), 0)
            while group:
                results = await target.send_group(group)
                again: list[Row] = []
                wait = 0.0
                for row, result in zip(group, results, strict=True):
                    if isinstance(result, Answer):
                        settle(row, result)
                        continue
                    attempts[row.index] += 1
                    progress.retried(result.reason)
                    if attempts[row.index] >= max_attempts:
                        settle(row, gave_up(row.caller_id, max_attempts, result.reason))
                    else:
                        again.append(row)
                        wait = max(wait, backoff.delay(attempts[row.index] - 1, result.retry_after_s))
                group = again
                if group:
                    await asyncio.sleep(wait)

    tasks = [asyncio.create_task(produce()), *(asyncio.create_task(send()) for _ in range(plan.senders))]
    try:
        # the first failure (TargetFailed) ends the pass; the rows answered so far are in the journal
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
