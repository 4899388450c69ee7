"""What a running kgserve app shares between its parts: the serving context (`ServeContext`, kept on
`app.state.kgserve`: settings, admission, the started engine client, the cfg's provenance)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kgserve.admission.limits import Admission
from kgserve.engine.client import EngineClient
from kgserve.settings import Settings

__all__ = ["ServeContext"]


@dataclass
class ServeContext:
    """What the routes share, kept on `app.state.kgserve` (one per app, no module globals)."""

    settings: Settings
    admission: Admission
    pool: EngineClient | None = None
    cfg_visits: int | None = None  # the served cfg's maxVisits (None: it sets none)
    provenance: dict[str, Any] | None = None
    cfg_source: str | None = None  # the cfg the config names (settings.engine.cfg is kgserve's copy of it)
    cfg_served: dict[str, Any] = field(default_factory=dict)  # what the engines run (kgserve.servedcfg.KeptCfg)
    engines_closed: bool = False  # the pool's close has begun (kgserve.app.close_engines: once only)
    extra: dict[str, Any] = field(default_factory=dict)
