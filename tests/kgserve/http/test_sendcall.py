"""kgserve.http.sendcall: a send that completes at once costs no task; one that waits is finished by a task."""

from __future__ import annotations

import asyncio

from kgserve.http.sendcall import SendCall


async def test_a_send_that_does_not_wait_completes_in_step() -> None:
    sent: list[str] = []
    done: list[BaseException | None] = []

    async def send(message: str) -> None:
        sent.append(message)

    assert SendCall(send("a"), done.append).step() is True
    assert sent == ["a"] and done == [None]


async def test_a_send_that_waits_is_finished_by_a_task_in_order() -> None:
    writable = asyncio.Event()
    sent: list[str] = []
    done: list[BaseException | None] = []

    async def send(message: str) -> None:
        await writable.wait()  # a paused transport, as uvicorn's flow control does
        await asyncio.sleep(0)
        sent.append(message)

    call = SendCall(send("b"), done.append)
    assert call.step() is False
    await asyncio.sleep(0.01)
    assert sent == [] and done == []
    writable.set()
    for _ in range(10):
        await asyncio.sleep(0)
    assert sent == ["b"] and done == [None]


async def test_errors_are_reported_and_a_waiting_send_can_be_abandoned() -> None:
    done: list[BaseException | None] = []

    async def broken(message: str) -> None:
        raise ConnectionResetError(message)

    assert SendCall(broken("c"), done.append).step() is True
    assert isinstance(done[0], ConnectionResetError)

    never = asyncio.Event()
    closed: list[bool] = []

    async def stuck(message: str) -> None:
        try:
            await never.wait()
        finally:
            closed.append(True)

    call = SendCall(stuck("d"), done.append)
    assert call.step() is False
    call.cancel()
    for _ in range(5):
        await asyncio.sleep(0)
    assert closed == [True] and len(done) == 1  # abandoned: closed, not reported as sent
