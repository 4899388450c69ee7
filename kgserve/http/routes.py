"""kgserve's routes; thin: the work is in kgserve.http.intake / kgserve.http.analysis / kgserve.http.readiness.

POST /analysis is normally taken before the router (kgserve.app.KgserveApp); the route here serves the
same endpoint to a caller that mounts the router alone, and answers 405 for other methods."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from kgserve.http.auth import TokenAuth
from kgserve.http.context import ServeContext
from kgserve.http.intake import AnalysisEndpoint
from kgserve.http.metrics import CONTENT_TYPE_LATEST, Metrics
from kgserve.http.readiness import readiness

__all__ = ["router"]

router = APIRouter()


def _ctx(request: Request) -> ServeContext:
    ctx: ServeContext = request.app.state.kgserve
    return ctx


class _Analysis:
    """The app's AnalysisEndpoint, found at request time (an ASGI app, so no request/response wrapping)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await AnalysisEndpoint(scope["app"].state.kgserve)(scope, receive, send)


router.add_route("/analysis", _Analysis(), methods=["POST"])  # type: ignore[arg-type]  # Starlette takes ASGI apps


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
