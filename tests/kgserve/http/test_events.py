"""The request's event channel: FIFO, a get waits for a put, a cancelled get loses nothing."""

from __future__ import annotations

import asyncio

from kgserve.http.exchange import EventChannel


async def test_fifo_and_waiting() -> None:
    channel: EventChannel[int] = EventChannel()
    channel.put_nowait(1)
    channel.put_nowait(2)
    assert [await channel.get(), await channel.get()] == [1, 2]
    getter = asyncio.create_task(channel.get())
    await asyncio.sleep(0)
    assert not getter.done()
    asyncio.get_running_loop().call_soon(channel.put_nowait, 3)
    assert await asyncio.wait_for(getter, 5) == 3


async def test_a_cancelled_get_loses_no_item() -> None:
    channel: EventChannel[str] = EventChannel()
    getter = asyncio.create_task(channel.get())
    await asyncio.sleep(0)
    getter.cancel()
    await asyncio.gather(getter, return_exceptions=True)
    channel.put_nowait("kept")
    channel.put_nowait("next")
    assert await channel.get() == "kept" and await channel.get() == "next"
