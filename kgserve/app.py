"""The kgserve ASGI app: `create_app(settings)` builds one, with its own pool, limits, metrics and auth.

No module globals: everything lives on `app.state` (`app.state.kgserve`, a ServeContext, and
`app.state.metrics`). /analysis, the hot path, goes straight from the app's entry to the access
middleware and kgserve.http.intake's plain ASGI endpoint (its one registration; it answers 405 to a method
other than POST): FastAPI's routing, dependency, exception and body-limit layers cost most of a request's CPU
there and give it nothing (it reads and bounds its body itself, and the access middleware turns an escaped
exception into its log line as for any route). Every other path goes through the FastAPI app as usual. When
`server.trusted_proxies` lists a proxy, kgserve.forwarded comes first, for every request and WebSocket.

The lifespan reads the cfg's promote header, starts the engine pool (the pool starts its engines in the
background: kgserve serves /healthz and /readyz while they start, and keeps serving if they fail) and
closes it at shutdown (terminate_all, stdin closed, wait, kill if needed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from kgserve.admission.limits import Admission
from kgserve.admission.proxies import TrustedProxies
from kgserve.auth import TokenAuth, token_from_env, tokens_from_env
from kgserve.context import ServeContext
from kgserve.engine.client import EngineClient
from kgserve.engine.pool import EnginePool
from kgserve.forwarded import ForwardedClients
from kgserve.http.access import AccessMiddleware
from kgserve.http.apidocs import docs_routes
from kgserve.http.intake import AnalysisEndpoint
from kgserve.http.logredact import install_redactor
from kgserve.http.pacing import RequestPacer
from kgserve.http.routes import router
from kgserve.katago.cfg import cfg_max_visits
from kgserve.metrics import Metrics
from kgserve.procs.malloc import trim_malloc
from kgserve.provenance import read_provenance
from kgserve.settings import Settings, load_settings
from kgserve.ws.websocket import websocket_endpoint

__all__ = ["KgserveApp", "PoolFactory", "close_engines", "create_app", "default_pool_factory"]

log = logging.getLogger("kgserve")
PoolFactory = Callable[[Settings], EngineClient]


def default_pool_factory(settings: Settings) -> EngineClient:
    return EnginePool(settings)


class KgserveApp(FastAPI):
    """FastAPI, with /analysis dispatched before its middleware stack (see the module docstring)."""

    analysis_app: ASGIApp | None = None
    forwarded: ForwardedClients | None = None  # server.trusted_proxies lists a proxy: in front of everything

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.forwarded is not None:
            await self.forwarded(scope, receive, send)
        else:
            await self.dispatch(scope, receive, send)

    async def dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.analysis_app is not None and scope["type"] == "http" and scope["path"] == "/analysis":
            scope["app"] = self
            await self.analysis_app(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


async def close_engines(ctx: ServeContext, grace_s: float) -> None:
    """Close the app's engine client, once: at the end of the lifespan, or from kgserve.cli when uvicorn skipped
    the lifespan's end (a second signal)."""
    if ctx.pool is None or ctx.engines_closed:
        return
    ctx.engines_closed = True
    log.info("closing the engine pool (grace %.1fs)", grace_s)
    await ctx.pool.close(grace_s)
    log.info("engine pool closed")


def _trim_soon() -> None:
    # a second later: when the budget empties, the last request's buffers are still referenced on the stack
    try:
        asyncio.get_running_loop().call_later(1.0, trim_malloc)
    except RuntimeError:  # no loop (its shutdown): now
        trim_malloc()


def create_app(settings: Settings | None = None, *, pool_factory: PoolFactory | None = None) -> KgserveApp:
    """The app for `settings` (default: runtime/config.yaml, so `uvicorn --factory kgserve.app:create_app`
    works too). `pool_factory` replaces the engine pool (tests)."""
    settings = settings if settings is not None else load_settings()
    admission = Admission(settings.limits)
    admission.budget.on_idle = _trim_soon  # a burst of big requests over: its memory back to the system
    admission.clients.on_drained = _trim_soon  # a burst of connections over (their read buffers) likewise
    ctx = ServeContext(settings=settings, admission=admission, cfg_visits=cfg_max_visits(settings.engine.cfg))
    metrics = Metrics(
        status=lambda: ctx.pool.status() if ctx.pool is not None else None,
        inflight=lambda: admission.inflight,
        refusals=lambda: admission.clients.refusals,
    )
    factory = pool_factory or default_pool_factory

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        provenance = read_provenance(settings.engine.cfg)
        if provenance is not None:
            log.info("%s", provenance.summary())
            warning = provenance.warning()
            if warning:
                log.warning("%s", warning)
        ctx.provenance = provenance.as_dict() if provenance is not None else None
        pool = factory(settings)
        await pool.start()
        ctx.pool = pool
        try:
            yield
        finally:
            await close_engines(ctx, settings.server.grace_period_s)

    app = KgserveApp(title="kgserve", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    # no redirect from /analysis/ to /analysis: Starlette builds the Location from the client's Host header
    app.router.redirect_slashes = False
    token = token_from_env(settings.server)
    auth = TokenAuth(token, tokens_from_env(settings.priority.interactive_token_env))
    app.state.kgserve = ctx
    app.state.metrics = metrics
    app.state.auth = auth
    app.include_router(router)
    if settings.server.docs:
        app.router.routes.extend(docs_routes(settings, auth=token is not None))
    if settings.websocket.enabled:
        install_redactor()  # uvicorn logs the handshake's query string, which may hold the token
        app.add_api_websocket_route(settings.websocket.path, websocket_endpoint)
    # requests a second per client while others have some in progress: one pacer for /analysis and the other routes
    pacer = RequestPacer(admission.request_rates)
    app.add_middleware(AccessMiddleware, metrics=metrics, auth=auth, pacer=pacer)
    app.analysis_app = AccessMiddleware(AnalysisEndpoint(ctx), metrics=metrics, auth=auth, pacer=pacer)
    proxies = TrustedProxies(settings.server.trusted_proxies)
    if proxies:  # clients behind them are told apart by X-Forwarded-For; with none, nothing reads the header
        app.forwarded = ForwardedClients(app.dispatch, proxies=proxies, clients=admission.clients, metrics=metrics)
    return app
