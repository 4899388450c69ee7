"""What a running kgserve app shares between its parts: the engine client it serves with (`EngineClient`, the
protocol `kgserve.engine.pool.EnginePool` implements and tests replace) and the serving context (`ServeContext`,
kept on `app.state.kgserve`: settings, admission, the started client, the cfg's provenance)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kgserve.http.limits import Admission
from kgserve.katago.protocol import Query
from kgserve.settings import Settings

__all__ = ["EngineClient", "ServeContext"]


class EngineClient(Protocol):
    """The engines behind kgserve: started by the app's lifespan, closed at its end, and in between given
    queries (`submit` returns the query's response lines, `abort` ends one early) and asked for `status`
    (the /readyz and /metrics document: `ready`, `reason`, `engines`, ...)."""

    async def start(self) -> None: ...

    def submit(self, query: Query) -> AsyncIterator[bytes]: ...

    def abort(self, stream: Any, turns: list[int] | None = None) -> None: ...

    def status(self) -> Mapping[str, Any]: ...

    async def close(self, grace_s: float) -> None: ...


@dataclass
class ServeContext:
    """What the routes share, kept on `app.state.kgserve` (one per app, no module globals)."""

    settings: Settings
    admission: Admission
    pool: EngineClient | None = None
    cfg_visits: int | None = None  # the served cfg's maxVisits (None: it sets none)
    provenance: dict[str, Any] | None = None
    engines_closed: bool = False  # the pool's close has begun (kgserve.app.close_engines: once only)
    extra: dict[str, Any] = field(default_factory=dict)
