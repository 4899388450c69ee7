"""/openapi.json and /docs: the document validates, shows the real sample, and says what the server does.

The documented error examples are checked against real responses of a real uvicorn (the engine pool is
scripted), so the document cannot drift from the messages kgserve sends. The Swagger UI page is opened
in a real headless Chromium when one is installed (Debian package `chromium`), skipped otherwise.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from openapi_spec_validator import validate

from kgserve.apidocs import STATIC_FILES, swagger_dir
from kgserve.app import create_app
from kgserve.openapi import NDJSON, SAMPLE_NAME, build_openapi
from tests.conftest import REPO, analysis_query

SAMPLES = REPO / "assets" / "analysis"
QUERY = analysis_query("q1", size=9, max_visits=10)


def _examples(document: dict[str, Any], code: str) -> dict[str, Any]:
    content = document["paths"]["/analysis"]["post"]["responses"][code]["content"]
    return {name: item["value"] for name, item in content[NDJSON]["examples"].items()}


def _lines(response: httpx.Response) -> list[Any]:
    return [json.loads(line) for line in response.content.splitlines()]


@pytest.mark.parametrize("auth", [False, True])
def test_document_validates_and_documents_analysis(settings_factory: Any, auth: bool) -> None:
    document = build_openapi(settings_factory(), auth=auth)
    validate(document)  # raises on an invalid OpenAPI 3.0 document
    post = document["paths"]["/analysis"]["post"]
    sample = json.loads((SAMPLES / "inputs" / f"{SAMPLE_NAME}.json").read_text())
    assert post["requestBody"]["content"]["application/json"]["examples"]["sample"]["value"] == sample
    assert NDJSON in post["requestBody"]["content"]
    answer = (SAMPLES / "outputs" / f"{SAMPLE_NAME}.jsonl").read_text().splitlines()[0]
    assert list(_examples(document, "200").values()) == [json.loads(answer)]
    assert {p["name"] for p in post["parameters"]} == {"X-Deadline-Ms", "X-Priority-Class", "X-Request-ID"}
    responses = post["responses"]
    codes = {"200", "400", "408", "413", "429", "503"} | ({"401"} if auth else set())
    assert set(responses) == codes
    assert {"X-Request-ID", "X-Visits-Clamped", "X-Deadline-Exceeded"} <= set(responses["200"]["headers"])
    assert "Retry-After" in responses["429"]["headers"] and "Retry-After" in responses["503"]["headers"]
    for code in codes - {"401", "408"}:
        assert NDJSON in responses[code]["content"]
    assert set(document["paths"]) == {"/analysis", "/healthz", "/readyz", "/metrics"}
    assert ("security" in post) is auth and ("security" in document["paths"]["/metrics"]["get"]) is auth


def test_document_without_the_sample_files_still_validates(settings_factory: Any, tmp_path: Path) -> None:
    document = build_openapi(settings_factory(), sample_root=tmp_path)
    validate(document)
    assert _examples(document, "200") == {}


async def test_served_document_and_page(settings_factory: Any, serve: Any, scripted_pool: Any) -> None:
    settings = settings_factory()
    app = create_app(settings, pool_factory=lambda s: scripted_pool)
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        served = await client.get("/openapi.json")
        page = await client.get("/docs")
        assets = {name: await client.get(f"/docs/static/{name}") for name in STATIC_FILES}
        other = await client.get("/docs/static/index.html")
        ready = await client.get("/readyz")
    assert served.status_code == 200 and served.json() == json.loads(json.dumps(build_openapi(settings)))
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'url: "openapi.json"' in page.text
    for name in STATIC_FILES:
        assert f'"docs/static/{name}"' in page.text
        assert assets[name].status_code == 200
        assert assets[name].content == (swagger_dir() / name).read_bytes()  # type: ignore[operator]
    assert assets["swagger-ui-bundle.js"].headers["content-type"].startswith("text/javascript")
    assert other.status_code == 404  # only the files the page loads are served
    readiness = served.json()["components"]["schemas"]["Readiness"]["properties"]
    assert set(ready.json()) == set(readiness)


async def test_docs_switched_off(settings_factory: Any, serve: Any, scripted_pool: Any) -> None:
    app = create_app(settings_factory(server={"docs": False}), pool_factory=lambda s: scripted_pool)
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        codes = [(await client.get(path)).status_code for path in ("/docs", "/openapi.json", "/docs/static/x")]
        health = await client.get("/healthz")
    assert codes == [404, 404, 404] and health.status_code == 200


async def test_documented_errors_are_what_kgserve_sends(settings_factory: Any, serve: Any, scripted_pool: Any) -> None:
    settings = settings_factory(limits={"max_inflight_queries": 1, "max_queries_per_request": 2, "max_visits": 5000})
    document = build_openapi(settings)
    app = create_app(settings, pool_factory=lambda s: scripted_pool)
    async with serve(app) as url, httpx.AsyncClient(base_url=url, timeout=60) as client:
        deadline = await client.post("/analysis", content=json.dumps(QUERY), headers={"X-Deadline-Ms": "soon"})
        over_cap = await client.post("/analysis", content=json.dumps({**QUERY, "maxVisits": 5001}))
        many = await client.post("/analysis", content="\n".join(json.dumps({**QUERY, "id": f"q{i}"}) for i in range(3)))
        slow = asyncio.create_task(
            client.post("/analysis", content=json.dumps({**QUERY, "id": "slow", "maxVisits": 2000}))
        )
        async with asyncio.timeout(30):
            while not scripted_pool.streams:  # noqa: ASYNC110 (the scripted pool has no event to wait on)
                await asyncio.sleep(0.01)
        busy = await client.post("/analysis", content=json.dumps(QUERY))
        assert (await slow).status_code == 200
    assert (deadline.status_code, _lines(deadline)) == (400, [_examples(document, "400")["bad deadline header"]])
    assert (over_cap.status_code, _lines(over_cap)) == (400, [_examples(document, "400")["over the visit cap"]])
    assert (many.status_code, _lines(many)) == (413, [_examples(document, "413")["too many lines"]])
    assert (busy.status_code, _lines(busy)) == (429, [_examples(document, "429")["overloaded"]])
    assert busy.headers["retry-after"] == "1"


async def test_documented_503_and_401(settings_factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # no lifespan through ASGITransport: the pool never starts, which is the documented 503
    plain = create_app(settings_factory())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=plain), base_url="http://kgserve") as client:
        no_pool = await client.post("/analysis", content=json.dumps(QUERY))
    assert (no_pool.status_code, _lines(no_pool)) == (
        503,
        [_examples(build_openapi(settings_factory()), "503")["no pool"]],
    )
    monkeypatch.setenv("KGSERVE_TEST_TOKEN", "s3cret")
    settings = settings_factory(server={"auth_token_env": "KGSERVE_TEST_TOKEN"})
    guarded = create_app(settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=guarded), base_url="http://kgserve") as client:
        refused = await client.post("/analysis", content=json.dumps(QUERY))
        document = (await client.get("/openapi.json")).json()
    example = document["paths"]["/analysis"]["post"]["responses"]["401"]["content"]["application/json"]["example"]
    assert refused.status_code == 401 and refused.json() == example
    assert document["paths"]["/analysis"]["post"]["security"] == [{"bearer": []}]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="no headless Chromium (Debian package chromium)")
async def test_docs_page_renders_in_chromium(
    settings_factory: Any, serve: Any, scripted_pool: Any, tmp_path: Path
) -> None:
    app = create_app(settings_factory(), pool_factory=lambda s: scripted_pool)
    async with serve(app) as url:
        browser = await asyncio.create_subprocess_exec(
            str(shutil.which("chromium")),
            "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=20000", "--dump-dom", f"{url}/docs#/default/analysis",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        try:
            async with asyncio.timeout(120):
                dom, _ = await browser.communicate()
        finally:
            if browser.returncode is None:
                browser.kill()
                await browser.wait()
    text = dom.decode("utf-8", errors="replace")
    assert "Failed to load API definition" not in text
    # rendered from the schema (deep link: the /analysis operation is expanded)
    for expected in ("/analysis", "/readyz", "/metrics", "X-Deadline-Ms", NDJSON, SAMPLE_NAME, "X-Visits-Clamped"):
        assert expected in text, expected
