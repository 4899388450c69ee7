"""One `await send(message)` driven by hand, so that a send the transport takes at once costs no task.

An ASGI server's send completes without suspending unless the transport is paused (its buffer over the
high-water mark: the client is not reading). `SendCall.step()` runs the coroutine to that point: done, it
reports at once; suspended, a task finishes it (what asyncio.Task would have done from the start).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["SendCall"]


class SendCall:
    def __init__(self, coro: Coroutine[Any, Any, None], done: Callable[[BaseException | None], None]) -> None:
        self._coro = coro
        self._done = done  # called once: None when the send completed, else what it raised
        self._task: asyncio.Task[None] | None = None

    def step(self) -> bool:
        """Run the send; True when it is over (done() was called), False when a task finishes it later."""
        try:
            yielded = self._coro.send(None)
        except StopIteration:
            self._done(None)
            return True
        except Exception as exc:
            self._done(exc)
            return True
        self._task = asyncio.get_running_loop().create_task(self._finish(yielded))
        return False

    async def _finish(self, yielded: Any) -> None:
        try:
            while True:
                if isinstance(yielded, asyncio.Future):
                    yielded._asyncio_future_blocking = False  # as asyncio.Task does before waiting on it
                    await asyncio.wait((yielded,))
                else:  # a bare yield (asyncio.sleep(0)): one loop turn
                    await asyncio.sleep(0)
                yielded = self._coro.send(None)
        except StopIteration:
            self._done(None)
        except asyncio.CancelledError:
            self._coro.close()
            raise
        except Exception as exc:
            self._done(exc)

    def cancel(self) -> None:
        """Abandon a send that waits: its task is cancelled and the send closed where it waits."""
        if self._task is not None:
            self._task.cancel()
        self._coro.close()  # a no-op once finished
