"""HTTP semantics of /analysis against a scripted pool: exact control of when lines and failures come.

Real uvicorn on 127.0.0.1, real HTTP clients; only the engine pool is scripted (see conftest)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from kgserve.app import create_app
from tests.conftest import analysis_query

QUERY = analysis_query("q", size=9, max_visits=10)


def body(**fields: Any) -> bytes:
    return json.dumps({**QUERY, **fields}).encode()


def lines(response: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line) for line in response.content.splitlines()]


async def test_single_query_streams_ndjson_with_request_id(
    settings_factory: Any, serve: Any, scripted_pool: Any
) -> None:
    app = create_app(settings_factory(), pool_factory=lambda s: scripted_pool)
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        response = await client.post("/analysis", content=body(), headers={"X-Request-ID": "abc-1"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/x-ndjson"
    assert response.headers["x-request-id"] == "abc-1"
    assert lines(response) == [{"id": "q", "isDuringSearch": False, "turnNumber": 0}]
    assert scripted_pool.closed


async def test_rejections_come_first_and_all_rejected_is_400(
    settings_factory: Any, serve: Any, scripted_pool: Any
) -> None:
    app = create_app(settings_factory(), pool_factory=lambda s: scripted_pool)
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        mixed = await client.post("/analysis", content=b"[1]\n" + body(id="ok") + b"\nnope\n")
        rejected = await client.post("/analysis", content=b'{"id":"a","action":"terminate_all"}')
        empty = await client.post("/analysis", content=b"  \n")
    assert mixed.status_code == 200
    texts = [line["error"] if "error" in line else line["id"] for line in lines(mixed)]
    assert texts[0].startswith("Request line was valid json but was not an object")
    assert texts[1].startswith("[json.exception.parse_error.101]")
    assert texts[2] == "ok"
    assert rejected.status_code == 400
    assert lines(rejected) == [
        {
            "error": "kgserve accepts analysis queries only: the 'terminate_all' action is not available over HTTP",
            "field": "action",
            "id": "a",
        }
    ]
    assert empty.status_code == 400
    assert [s.query.caller_id for s in scripted_pool.streams] == ["ok"]


async def test_deadline_before_first_line_sets_header(settings_factory: Any, serve: Any, scripted_pool: Any) -> None:
    app = create_app(settings_factory(), pool_factory=lambda s: scripted_pool)
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        started = asyncio.get_running_loop().time()
        response = await client.post("/analysis", content=body(maxVisits=60_000), headers={"X-Deadline-Ms": "150"})
        elapsed = asyncio.get_running_loop().time() - started
        bad = await client.post("/analysis", content=body(), headers={"X-Deadline-Ms": "soon"})
    assert response.status_code == 200
    assert response.headers["x-deadline-exceeded"] == "true"
    assert lines(response) == [{"id": "q", "isDuringSearch": False, "turnNumber": 0, "partial": True}]
    assert scripted_pool.aborted == ["q"]
    assert elapsed < 5
    assert bad.status_code == 400


async def test_deadline_after_headers_appends_a_warning_line(
    settings_factory: Any, serve: Any, scripted_pool: Any
) -> None:
    app = create_app(settings_factory(), pool_factory=lambda s: scripted_pool)
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        response = await client.post(
            "/analysis", content=body(maxVisits=60_000, reportDuringSearchEvery=0.1), headers={"X-Deadline-Ms": "300"}
        )
    assert response.status_code == 200
    assert "x-deadline-exceeded" not in response.headers
    got = lines(response)
    assert [line.get("isDuringSearch") for line in got[:2]] == [True, False]
    assert got[2]["id"] == "q" and "deadline of 300 ms exceeded" in got[2]["warning"]


async def test_engine_that_never_answers_terminate_does_not_hang(
    settings_factory: Any, serve: Any, pool_class: Any
) -> None:
    pool = pool_class(ignore_abort=True)
    app = create_app(settings_factory(limits={"terminate_grace_s": 0.3}), pool_factory=lambda s: pool)
    async with serve(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        response = await client.post("/analysis", content=body(maxVisits=60_000), headers={"X-Deadline-Ms": "100"})
    assert response.status_code == 503
    assert response.headers["x-deadline-exceeded"] == "true"
    (line,) = lines(response)
    assert line["id"] == "q" and line["error"].startswith("kgserve: the engine did not answer terminate")


async def test_engine_crash_before_first_line_is_503(settings_factory: Any, serve: Any, scripted_pool: Any) -> None:
    app = create_app(settings_factory(), pool_factory=lambda s: scripted_pool)
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        pending = asyncio.create_task(client.post("/analysis", content=body(maxVisits=60_000)))
        await _until(lambda: len(scripted_pool.streams) == 1)
        scripted_pool.kill()
        response = await asyncio.wait_for(pending, 10)
    assert response.status_code == 503
    (line,) = lines(response)
    assert line["id"] == "q"
    assert line["error"].startswith("engine died before finishing this query")
    assert "signal 9" in line["error"]


async def test_engine_crash_after_first_line_appends_error_line(
    settings_factory: Any, serve: Any, scripted_pool: Any
) -> None:
    app = create_app(settings_factory(), pool_factory=lambda s: scripted_pool)
    async with (
        serve(app) as url,
        httpx.AsyncClient(base_url=url) as client,
        client.stream("POST", "/analysis", content=body(maxVisits=60_000, reportDuringSearchEvery=0.1)) as response,
    ):
        assert response.status_code == 200
        chunks = response.aiter_lines()
        first = json.loads(await anext(chunks))
        scripted_pool.kill()
        rest = [json.loads(line) async for line in chunks if line]
    assert first["isDuringSearch"] is True
    assert len(rest) == 1 and rest[0]["id"] == "q" and rest[0]["error"].startswith("engine died")


async def test_not_ready_pool_is_503(settings_factory: Any, serve: Any, scripted_pool: Any) -> None:
    app = create_app(settings_factory(), pool_factory=lambda s: scripted_pool)
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        scripted_pool.ready = False
        response = await client.post("/analysis", content=body())
        readyz = await client.get("/readyz")
        scripted_pool.ready = True
        readyz_after = await client.get("/readyz")
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
    assert "no engine is ready" in lines(response)[0]["error"]
    assert readyz.status_code == 503 and readyz.json()["reason"] == "engine 0 is restarting"
    assert readyz.json()["engines"][0]["last_stderr"] == ["x"]
    assert readyz_after.status_code == 200
    document = readyz_after.json()
    assert document["ready"] is True and document["backend"] == "sim" and document["simulated"] is True
    assert document["katago_version"] == "1.17.2-sim"
    assert document["cfg"].endswith("katago_serving.cfg") and document["model"].endswith(".bin.gz")


async def test_in_flight_bound_gives_429_at_once(settings_factory: Any, serve: Any, scripted_pool: Any) -> None:
    app = create_app(settings_factory(limits={"max_inflight_queries": 2}), pool_factory=lambda s: scripted_pool)
    two = body(id="a", maxVisits=2000) + b"\n" + body(id="b", maxVisits=2000)
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        holding = asyncio.create_task(client.post("/analysis", content=two))
        await _until(lambda: len(scripted_pool.streams) == 2)
        started = asyncio.get_running_loop().time()
        refused = await client.post("/analysis", content=body())
        refused_after = asyncio.get_running_loop().time() - started
        held = await holding
        after = await client.post("/analysis", content=body())
        metrics = (await client.get("/metrics")).text
    assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
    assert "limits.max_inflight_queries" in lines(refused)[0]["error"]
    assert refused_after < 1.0
    assert held.status_code == 200 and after.status_code == 200
    assert 'kgserve_requests_total{outcome="overloaded"} 1.0' in metrics
    assert "kgserve_inflight_queries 0.0" in metrics
    assert 'kgserve_engine_up{engine="0"} 1.0' in metrics


async def test_body_limits_give_413(settings_factory: Any, serve: Any, scripted_pool: Any) -> None:
    settings = settings_factory(limits={"max_body_bytes": 2000, "max_queries_per_request": 3})
    app = create_app(settings, pool_factory=lambda s: scripted_pool)

    async def chunked() -> Any:
        for _ in range(10):
            yield b" " * 500

    async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        declared = await client.post("/analysis", content=b" " * 3000)
        streamed = await client.post("/analysis", content=chunked())
        many = await client.post("/analysis", content=b"\n".join(body(id=str(i)) for i in range(4)))
    for response in (declared, streamed):
        assert response.status_code == 413
        assert "limits.max_body_bytes" in lines(response)[0]["error"]
    assert many.status_code == 413 and "limits.max_queries_per_request" in lines(many)[0]["error"]
    assert scripted_pool.streams == []


@pytest.mark.parametrize("mode", ["reject", "clamp"])
async def test_visits_cap(settings_factory: Any, serve: Any, scripted_pool: Any, mode: str) -> None:
    settings = settings_factory(limits={"max_visits": 50, "visits_over_cap": mode, "max_turns_per_query": 3})
    app = create_app(settings, pool_factory=lambda s: scripted_pool)
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        over = await client.post("/analysis", content=body(maxVisits=51))
        turns = await client.post("/analysis", content=body(analyzeTurns=[0, 1, 2, 3]))
    assert turns.status_code == 400 and "limits.max_turns_per_query" in lines(turns)[0]["error"]
    if mode == "reject":
        assert over.status_code == 400
        (line,) = lines(over)
        assert line == {
            "error": "kgserve: maxVisits 51 is over the cap of 50 (limits.max_visits)",
            "field": "maxVisits",
            "id": "q",
        }
        assert scripted_pool.streams == []
    else:
        assert over.status_code == 200 and over.headers["x-visits-clamped"] == "50"
        assert scripted_pool.streams[0].query.body["maxVisits"] == 50


async def test_bearer_token(
    settings_factory: Any, serve: Any, scripted_pool: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KGSERVE_TEST_TOKEN", "s3cret")
    settings = settings_factory(server={"auth_token_env": "KGSERVE_TEST_TOKEN"})
    app = create_app(settings, pool_factory=lambda s: scripted_pool)
    good = {"Authorization": "Bearer s3cret"}
    async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
        missing = await client.post("/analysis", content=body())
        wrong = await client.post("/analysis", content=body(), headers={"Authorization": "Bearer s3cre"})
        metrics_missing = await client.get("/metrics")
        healthz = await client.get("/healthz")
        ok = await client.post("/analysis", content=body(), headers=good)
        metrics_ok = await client.get("/metrics", headers=good)
    assert [r.status_code for r in (missing, wrong, metrics_missing)] == [401, 401, 401]
    assert missing.headers["www-authenticate"] == "Bearer"
    assert healthz.status_code == 200 and healthz.json() == {"status": "alive"}
    assert ok.status_code == 200 and metrics_ok.status_code == 200
    assert 'kgserve_requests_total{outcome="unauthorized"} 3.0' in metrics_ok.text


async def test_client_disconnect_aborts_its_queries(settings_factory: Any, serve: Any, scripted_pool: Any) -> None:
    app = create_app(settings_factory(), pool_factory=lambda s: scripted_pool)
    async with serve(app) as url:
        port = int(url.rsplit(":", 1)[1])
        payload = body(id="gone", maxVisits=60_000)
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /analysis HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload))
        await writer.drain()
        await _until(lambda: len(scripted_pool.streams) == 1)
        writer.close()
        await _until(lambda: scripted_pool.aborted == ["gone"])
        metrics = await _metrics_once_counted(url, "disconnect")
    assert 'kgserve_requests_total{outcome="disconnect"} 1.0' in metrics
    assert "kgserve_inflight_queries 0.0" in metrics


async def _until(condition: Any, within: float = 10.0) -> None:
    """Poll a condition on state the test cannot await (the pool's bookkeeping)."""
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def _metrics_once_counted(url: str, outcome: str, within: float = 10.0) -> str:
    """/metrics as soon as a request with this outcome is counted: polled, because kgserve counts a hang-up
    after the client's close reached it, which a fixed wait cannot promise on a loaded machine."""
    async with httpx.AsyncClient(base_url=url) as client, asyncio.timeout(within):
        while f'outcome="{outcome}"' not in (metrics := (await client.get("/metrics")).text):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    return metrics


async def test_query_without_turns_is_answered_by_nothing(
    settings_factory: Any, serve: Any, scripted_pool: Any
) -> None:
    app = create_app(settings_factory(), pool_factory=lambda s: scripted_pool)
    async with serve(app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
        alone = await client.post("/analysis", content=body(analyzeTurns=[]))
        mixed = await client.post("/analysis", content=body(id="none", analyzeTurns=[]) + b"\n" + body(id="one"))
    assert alone.status_code == 200 and alone.content == b""
    assert mixed.status_code == 200 and [line["id"] for line in lines(mixed)] == ["one"]
    assert [s.query.caller_id for s in scripted_pool.streams] == ["one"]


async def test_client_gone_before_its_body_arrived(settings_factory: Any, serve: Any, scripted_pool: Any) -> None:
    app = create_app(settings_factory(), pool_factory=lambda s: scripted_pool)
    async with serve(app) as url:
        port = int(url.rsplit(":", 1)[1])
        _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b'POST /analysis HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"id":')
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.close()
        metrics = await _metrics_once_counted(url, "disconnect")
    assert 'kgserve_requests_total{outcome="disconnect"} 1.0' in metrics
    assert 'outcome="error"' not in metrics
    assert scripted_pool.streams == []


async def test_readyz_shows_the_promote_provenance(
    settings_factory: Any, serve: Any, scripted_pool: Any, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from kgserve.provenance import render_header

    cfg = tmp_path / "katago_serving.cfg"
    cfg.write_text(render_header({"run_id": "abc123", "backend": "sim"}, "numAnalysisThreads = 4\n") + "# edited\n")
    settings = settings_factory()
    settings = settings.model_copy(update={"engine": settings.engine.model_copy(update={"cfg": cfg})})
    app = create_app(settings, pool_factory=lambda s: scripted_pool)
    with caplog.at_level("INFO", logger="kgserve"):
        async with serve(app) as url, httpx.AsyncClient(base_url=url) as client:
            document = (await client.get("/readyz")).json()
    assert document["cfg"] == str(cfg)
    assert document["provenance"]["run_id"] == "abc123" and document["provenance"]["modified"] is True
    assert any("edited after promotion" in record.getMessage() for record in caplog.records)
