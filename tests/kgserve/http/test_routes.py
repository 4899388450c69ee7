"""The root answers with the service's routes (not a 404). /analysis is registered once, as a plain ASGI app in
front of FastAPI's router: POST runs queries, any other method gets FastAPI's own 405 (with `Allow: POST`), and the
route table holds no second /analysis."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from kgserve.app import create_app


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "HEAD"])
async def test_other_methods_on_analysis_get_405(settings_factory: Any, method: str) -> None:
    app = create_app(settings_factory())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        response = await client.request(method, "/analysis")
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.headers["x-request-id"]  # through the access middleware like any request
    if method != "HEAD":
        assert response.json() == {"detail": "Method Not Allowed"}


def test_analysis_is_not_in_the_route_table(settings_factory: Any) -> None:
    app = create_app(settings_factory())
    assert "/analysis" not in [getattr(route, "path", None) for route in app.router.routes]


async def test_the_root_says_where_the_routes_are(settings_factory: Any) -> None:
    app = create_app(settings_factory())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        response = await client.get("/")
    assert response.status_code == 200
    body = response.json()
    assert body["service"] == "kgserve"
    assert {"POST /analysis", "GET /readyz", "GET /healthz", "GET /metrics"} <= set(body["routes"])
