"""GET /openapi.json and GET /docs (Swagger UI), on when runtime/config.yaml says `server.docs: true`.

The page loads Swagger UI from the `swagger-ui-bundle` package, served by kgserve itself under
/docs/static/: nothing comes from a CDN, so the page works on a cluster node without internet access.
Without that package /docs is a plain page that links the document. Plain Starlette routes: they do not
depend on how /analysis is implemented (kgserve.http.openapi builds the document by hand).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from kgserve.http.openapi import build_openapi
from kgserve.settings import Settings

try:
    import swagger_ui_bundle
except ImportError:  # a dependency of kgserve, but /docs still works without it (a plain page)
    swagger_ui_bundle = None

__all__ = ["STATIC_FILES", "docs_routes", "swagger_dir"]

# the Swagger UI files the page loads; nothing else of the package is served
STATIC_FILES = ("swagger-ui.css", "swagger-ui-bundle.js", "swagger-ui-standalone-preset.js", "favicon-32x32.png")

_SWAGGER_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<link rel="icon" type="image/png" href="docs/static/favicon-32x32.png">
<link rel="stylesheet" href="docs/static/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="docs/static/swagger-ui-bundle.js"></script>
<script src="docs/static/swagger-ui-standalone-preset.js"></script>
<script>
window.ui = SwaggerUIBundle({{
  url: "openapi.json",
  dom_id: "#swagger-ui",
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
  layout: "BaseLayout",
  deepLinking: true
}});
</script>
</body>
</html>
"""

_PLAIN_PAGE = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>{title}</title></head>
<body>
<h1>{title}</h1>
<p>The API is described in <a href="openapi.json">openapi.json</a> (OpenAPI 3.0). Install the
<code>swagger-ui-bundle</code> package to browse it here.</p>
</body>
</html>
"""


def swagger_dir() -> Path | None:
    """The folder of Swagger UI's files from the swagger-ui-bundle package, or None without it."""
    if swagger_ui_bundle is None:
        return None
    folder = Path(str(swagger_ui_bundle.swagger_ui_path))
    return folder if all((folder / name).is_file() for name in STATIC_FILES) else None


def docs_routes(settings: Settings, *, auth: bool) -> list[BaseRoute]:
    """The routes of /openapi.json, /docs and /docs/static/<file> for a kgserve with `settings`."""
    document = build_openapi(settings, auth=auth)
    title = html.escape(f"kgserve {document['info']['version']}: API")
    assets = swagger_dir()
    page = (_SWAGGER_PAGE if assets is not None else _PLAIN_PAGE).format(title=title)

    async def openapi_json(request: Request) -> Response:
        return JSONResponse(document)

    async def docs(request: Request) -> Response:
        return HTMLResponse(page)

    async def static(request: Request) -> Response:
        name: Any = request.path_params["name"]
        if assets is None or name not in STATIC_FILES:
            return PlainTextResponse("not found", status_code=404)
        return FileResponse(assets / name)

    return [
        Route("/openapi.json", openapi_json, methods=["GET"]),
        Route("/docs", docs, methods=["GET"]),
        Route("/docs/static/{name}", static, methods=["GET"]),
    ]
