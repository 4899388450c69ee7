"""kgserve's routes besides /analysis; thin: the work is in kgserve.http.readiness and kgserve.metrics.

/analysis is not among them: it is a plain ASGI app (kgserve.http.intake.AnalysisEndpoint) that kgserve.app
puts in front of the router."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from kgserve.auth import TokenAuth
from kgserve.context import ServeContext
from kgserve.http.readiness import readiness
from kgserve.metrics import CONTENT_TYPE_LATEST, Metrics

__all__ = ["router"]

router = APIRouter()


def _ctx(request: Request) -> ServeContext:
    ctx: ServeContext = request.app.state.kgserve
    return ctx


@router.get("/", include_in_schema=False)
async def index(request: Request) -> JSONResponse:
    """What a browser or a bare `curl` of the address finds: where the service's routes are."""
    settings = _ctx(request).settings
    routes = {
        "POST /analysis": "KataGo analysis queries (JSON lines) in, KataGo's answer lines out",
        "GET /readyz": "engines ready, backend, model, cfg and its promote provenance",
        "GET /healthz": "200 while the process lives",
        "GET /metrics": "Prometheus metrics",
    }
    if settings.websocket.enabled:
        routes[f"WebSocket {settings.websocket.path}"] = "KataGo's protocol for KaTrain and interactive clients"
    if settings.server.docs:
        routes["GET /docs"] = "the API, with a sample to try"
    return JSONResponse({"service": "kgserve", "routes": routes})


@router.get("/healthz")
async def healthz() -> JSONResponse:
    return JSONResponse({"status": "alive"})


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    # /readyz is open to probes; the engines' stderr lines (which may quote other clients' queries) only
    # go to a caller that could also reach /analysis (no token configured, or the right one given)
    auth: TokenAuth = request.app.state.auth
    detailed = auth.allows("/analysis", request.headers.get("authorization"))
    ready, payload = readiness(_ctx(request), detailed=detailed)
    if not ready:
        request.state.outcome = "not_ready"  # not an analysis request refused as "unavailable"
    return JSONResponse(payload, status_code=200 if ready else 503)


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    registry: Metrics = request.app.state.metrics
    return Response(registry.render(), media_type=CONTENT_TYPE_LATEST)
