"""Fixtures for kgserve's HTTP tests: settings, an in-process uvicorn on 127.0.0.1, and a scripted pool.

The scripted pool (`ScriptedPool`) stands in for the engine pool where a test needs exact control of
timing (deadline, crash before/after the status line); everything else runs against the simulated
engine through the real pool (test_sim_*.py), which kgserve as a subprocess serves (the `kgserve_process`
fixture of tests/conftest.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from kgserve.cli import bind_socket, uvicorn_config
from kgserve.engine.errors import EngineDied
from kgserve.katago.protocol import Query
from kgserve.settings import Settings, load_settings
from tests.conftest import REPO


def make_settings(*, limits: dict[str, Any] | None = None, server: dict[str, Any] | None = None) -> Settings:
    settings = load_settings(REPO / "runtime" / "config.yaml").with_overrides(backend="sim", port=0)
    engine = settings.engine.model_copy(update={"restart_backoff_initial_s": 0.2, "restart_backoff_max_s": 1.0})
    return settings.model_copy(
        update={
            "engine": engine,
            "limits": settings.limits.model_copy(update=limits or {}),
            "server": settings.server.model_copy(update={"grace_period_s": 5.0, **(server or {})}),
        }
    )


@pytest.fixture
def settings_factory() -> Callable[..., Settings]:
    return make_settings


@asynccontextmanager
async def serving(app: Any, *, protocol: type[asyncio.Protocol] | None = None) -> AsyncIterator[str]:
    """A real uvicorn serving `app` on 127.0.0.1:<free port>, in this event loop (`protocol`: instead of
    kgserve's guarded protocol class, e.g. a subclass that watches the connection)."""
    sock = bind_socket("127.0.0.1", 0)
    config = uvicorn_config(app, app.state.kgserve.settings)
    if protocol is not None:
        config.http = protocol
    config.timeout_graceful_shutdown = 5
    server = uvicorn.Server(config)
    server.capture_signals = _no_signals  # type: ignore[method-assign]
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(60):
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 60)
        sock.close()


def _no_signals() -> Any:
    return contextlib.nullcontext()


@pytest.fixture
def serve() -> Callable[[Any], Any]:
    return serving


class ScriptedStream:
    def __init__(self, query: Query, pool: ScriptedPool) -> None:
        self.query = query
        self.pool = pool
        self.lines: asyncio.Queue[bytes | Exception | None] = asyncio.Queue()
        self.aborted = False
        self.task: asyncio.Task[None] | None = None

    def line(self, **fields: Any) -> bytes:
        payload = {"id": self.query.caller_id, **fields}
        return json.dumps(payload, separators=(",", ":")).encode()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            item = await self.lines.get()
            if item is None:
                return
            if isinstance(item, Exception):
                raise item
            yield item


class ScriptedPool:
    """Answers each query after `maxVisits` milliseconds (x `scale`) with one final line per turn.

    `reportDuringSearchEvery` gives one partial line first. abort() answers with a partial final line;
    kill() fails every unfinished stream; `ready` and `reason` feed status()."""

    def __init__(self, scale: float = 1.0, ignore_abort: bool = False) -> None:
        self.scale = scale
        self.ignore_abort = ignore_abort
        self.streams: list[ScriptedStream] = []
        self.aborted: list[str] = []
        self.ready = True
        self.closed = False

    async def start(self) -> None:
        return None

    async def close(self, grace: float) -> None:
        self.closed = True

    def status(self) -> dict[str, Any]:
        return {
            "ready": self.ready,
            "reason": None if self.ready else "engine 0 is restarting",
            "katago_version": "1.17.2-sim",
            "engines": [
                {
                    "index": 0,
                    "state": "ready" if self.ready else "restarting",
                    "pid": os.getpid(),
                    "restarts": 0,
                    "start_s": 0.1,
                    "last_stderr": ["x"],
                    "outstanding_visits": 0,
                }
            ],
        }

    def submit(self, query: Query, client: str | None = None) -> ScriptedStream:
        if not self.ready:
            raise EngineDied("no engine is ready")
        stream = ScriptedStream(query, self)
        self.streams.append(stream)
        stream.task = asyncio.create_task(self._run(stream))
        return stream

    async def _run(self, stream: ScriptedStream) -> None:
        visits = stream.query.visits or 10
        if stream.query.body.get("reportDuringSearchEvery"):
            await asyncio.sleep(0.01)
            stream.lines.put_nowait(stream.line(isDuringSearch=True, turnNumber=0))
        await asyncio.sleep(visits / 1000.0 * self.scale)
        stream.lines.put_nowait(stream.line(isDuringSearch=False, turnNumber=0))
        stream.lines.put_nowait(None)

    def abort(self, stream: ScriptedStream) -> None:
        self.aborted.append(stream.query.caller_id)
        if self.ignore_abort or stream.task is None or stream.task.done():
            return
        stream.task.cancel()
        stream.lines.put_nowait(stream.line(isDuringSearch=False, turnNumber=0, partial=True))
        stream.lines.put_nowait(None)

    def kill(self) -> None:
        for stream in self.streams:
            if stream.task is not None and not stream.task.done():
                stream.task.cancel()
                stream.lines.put_nowait(EngineDied("engine 0 exited with signal 9", exit_code=-9))


@pytest.fixture
def scripted_pool() -> ScriptedPool:
    return ScriptedPool()


@pytest.fixture
def pool_class() -> type[ScriptedPool]:
    return ScriptedPool


def write_config(directory: Path, *, backend: str = "sim", **sections: dict[str, Any]) -> Path:
    """A config file in `directory`: runtime/config.yaml with absolute paths and `sections` merged in."""
    import yaml

    raw = load_settings(REPO / "runtime" / "config.yaml").model_dump(mode="json", exclude_none=True)
    raw["engine"]["backend"] = backend
    for section, values in sections.items():
        target = raw
        for part in section.split("."):
            target = target.setdefault(part, {})
        target.update(values)
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def config_writer() -> Callable[..., Path]:
    return write_config


def gone(pid: int) -> bool:
    """True when no live process has this pid (a zombie waiting for a reaper counts as gone)."""
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture(scope="session")
def process_gone() -> Callable[[int], bool]:
    return gone
