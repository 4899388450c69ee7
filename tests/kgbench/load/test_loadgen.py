"""The load generator against a tiny aiohttp server on 127.0.0.1 (real sockets, real ClientSession)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from kgbench.load.generator import LoadSettings, ProgressUpdate, run_load
from kgbench.load.traffic import QuerySource


@dataclass
class Behaviour:
    """What the fake server does with request number n (1-based) at time t."""

    delay: Callable[[int, float], float] = lambda n, t: 0.005
    kind: Callable[[int], str] = lambda n: "ok"
    ids: list[str] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    concurrent: int = 0
    peak: int = 0


BKEY = web.AppKey("behaviour", Behaviour)


def final_line(req_id: str, visits: int) -> bytes:
    doc = {"id": req_id, "isDuringSearch": False, "turnNumber": 3, "moveInfos": [], "rootInfo": {"visits": visits}}
    return json.dumps(doc).encode() + b"\n"


async def handler(request: web.Request) -> web.StreamResponse:
    b: Behaviour = request.app[BKEY]
    body = json.loads(await request.read())
    b.ids.append(body["id"])
    b.bodies.append(body)
    n = len(b.ids)
    b.concurrent += 1
    b.peak = max(b.peak, b.concurrent)
    try:
        await asyncio.sleep(b.delay(n, time.monotonic()))
        kind = b.kind(n)
        if kind == "429":
            return web.Response(status=429, headers={"Retry-After": "1"}, text="busy")
        if kind == "503":
            return web.Response(status=503, text="engine down")
        if kind == "engine_error":
            return web.Response(body=json.dumps({"id": body["id"], "error": "bad"}).encode() + b"\n")
        if kind == "partial":
            return web.Response(body=json.dumps({"id": body["id"], "isDuringSearch": True, "rootInfo": {}}).encode())
        if kind == "cut":
            resp = web.StreamResponse(headers={"Content-Length": "100000"})
            await resp.prepare(request)
            await resp.write(b'{"id":')
            assert request.transport is not None
            request.transport.close()
            return resp
        if kind == "hang":
            await asyncio.sleep(1.5)
        return web.Response(body=final_line(body["id"], body["maxVisits"]), content_type="application/x-ndjson")
    finally:
        b.concurrent -= 1


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, Behaviour]]:
    app = web.Application()
    app[BKEY] = Behaviour()
    app.router.add_post("/analysis", handler)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}", app[BKEY]
    await runner.cleanup()


def tiny(**kw: Any) -> LoadSettings:
    base: dict[str, Any] = dict(
        concurrency=(2, 4), warmup_s=0.3, window_s=0.4, min_windows=3, max_windows=6, tolerance=0.5, max_visits=7
    )
    base.update(kw)
    return LoadSettings(**base)


async def test_closed_loop_levels_are_stable_and_summarised(server: tuple[str, Behaviour]) -> None:
    url, b = server
    b.delay = lambda n, t: 0.01
    updates: list[ProgressUpdate] = []
    # Long windows, a wide tolerance and many windows: on CI's two shared cores the test process stalls for a
    # few hundred ms now and then (this test failed there with 0.4 s windows at tolerance 0.5, 6 windows).
    # A stall of up to 0.75 s in one 1 s window still leaves three windows agreeing within 1.0; what is checked
    # is that a steady server is found steady and summarised, not how steady the machine is.
    load = tiny(window_s=1.0, tolerance=1.0, max_windows=10)
    res = await run_load(url, load, QuerySource.from_dirs(seed=1), updates.append)
    assert [lv.concurrency for lv in res.levels] == [2, 4]
    assert b.peak <= 4
    for lv in res.levels:
        assert lv.stable and lv.windows >= 3, lv.window_req_per_s
        assert lv.errors == 0 and lv.error_rate == 0.0
        # service time 10 ms -> c / 10 ms req/s at most (a behaviour: the generator keeps c in flight, no more);
        # no lower bound worth asserting on a busy box beyond "it measured something"
        assert 0 < lv.req_per_s <= lv.concurrency * 100 * 1.05
        assert lv.visits_per_s == pytest.approx(7 * lv.req_per_s)
        assert 10 <= lv.p50_ms <= lv.p90_ms <= lv.p99_ms <= lv.max_ms
    assert not res.unstable
    assert res.headline() is max(res.levels, key=lambda lv: lv.req_per_s)
    phases = {r.phase for r in res.records}
    assert {"warmup", "measure"} <= phases
    measured = [r for r in res.records if r.phase == "measure"]
    assert all(r.status == 200 and r.visits == 7 and r.bytes > 0 and r.error is None for r in measured)
    assert res.levels[0].requests == sum(1 for r in measured if r.level == 2)
    assert len(set(b.ids)) == len(b.ids)  # unique request ids
    assert res.position_repeat_rate == 0.0  # far fewer requests than the 13,400 distinct positions
    assert {u.phase for u in updates} >= {"warmup", "measure", "done"}
    assert res.transport == "http" and res.mode == "closed"


async def test_fluctuating_server_is_flagged_unstable(server: tuple[str, Behaviour]) -> None:
    url, b = server
    t0 = time.monotonic()
    # A server whose throughput collapses: fast for 0.5 s, then each answer takes 1.5 s. (A gradual slowdown
    # failed here on shared cores: stalls of the test process made three windows agree by chance.) With one
    # worker no stall can make them agree: after 0.5 s its answers come at least 1.5 s apart (one request in
    # flight, closed loop), so of any three consecutive 0.4 s windows (measuring starts after the 0.3 s warmup)
    # the last two, which start after 0.5 s, hold at most one answer; a window without any never agrees.
    b.delay = lambda n, t: 0.005 if t - t0 < 0.5 else 1.5
    res = await run_load(url, tiny(concurrency=(1,), tolerance=0.2, max_windows=5), QuerySource.from_dirs())
    lv = res.levels[0]
    assert not lv.stable and lv.windows == 5
    assert res.unstable
    assert 0.0 in lv.window_req_per_s


async def test_open_loop_measures_from_intended_send_time(server: tuple[str, Behaviour]) -> None:
    url, b = server
    b.delay = lambda n, t: 0.001
    load = tiny(mode="open", rate=80.0, concurrency=(64,), warmup_s=0.2, window_s=0.5, min_windows=3, max_windows=3)
    stall_at: list[float] = []

    async def stall() -> None:
        await asyncio.sleep(0.9)
        stall_at.append(time.monotonic())
        time.sleep(0.4)  # block the load generator's loop: arrivals due now are sent late  # noqa: ASYNC251

    task = asyncio.create_task(stall())
    res = await run_load(url, load, QuerySource.from_dirs())
    await task
    assert len(res.levels) == 1 and res.levels[0].offered_rate == 80.0
    sends = sorted(r.send_s for r in res.records)
    # Poisson arrivals: intended times do not bunch up after the stall
    assert len(sends) > 40
    late = [r for r in res.records if r.latency_ms > 150]
    assert late, "requests due during the stall must show the stall in their latency"
    # the earliest-intended request in the stall waited for (nearly) the whole stall
    assert max(r.latency_ms for r in res.records) > 300
    # ... and the generator marks its own lag: the run is invalid
    assert res.invalid and res.invalid_reason is not None and "event loop" in res.invalid_reason


async def test_open_loop_over_the_cap_counts_overload(server: tuple[str, Behaviour]) -> None:
    url, b = server
    b.delay = lambda n, t: 0.3
    load = tiny(mode="open", rate=100.0, concurrency=(3,), warmup_s=0.0, window_s=0.5, min_windows=2, max_windows=2)
    res = await run_load(url, load, QuerySource.from_dirs())
    lv = res.levels[0]
    assert b.peak <= 3
    assert lv.errors_by_kind.get("overload", 0) > 10
    assert 0.0 < lv.error_rate < 1.0


async def test_error_kinds(server: tuple[str, Behaviour]) -> None:
    url, b = server
    kinds = ["ok", "429", "503", "engine_error", "partial", "cut", "hang"]
    b.kind = lambda n: kinds[n % len(kinds)]
    load = tiny(concurrency=(4,), warmup_s=0.0, window_s=1.0, min_windows=2, max_windows=2, request_timeout_s=0.5)
    res = await run_load(url, load, QuerySource.from_dirs())
    seen = {r.error for r in res.records}
    assert seen >= {None, "overload", "unavailable", "engine_error", "bad_response", "disconnect", "timeout"}
    by_status = {r.error: r.status for r in res.records}
    assert by_status["overload"] == 429 and by_status["unavailable"] == 503 and by_status["timeout"] == 0
    lv = res.levels[0]
    assert lv.timeouts == lv.errors_by_kind["timeout"] > 0
    assert lv.errors == sum(lv.errors_by_kind.values())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_refused_connection_is_a_connect_error() -> None:
    load = tiny(concurrency=(1,), warmup_s=0.0, window_s=0.2, min_windows=1, max_windows=1)
    res = await run_load(f"http://127.0.0.1:{free_port()}", load, QuerySource.from_dirs())
    assert res.records and all(r.error == "connect" and r.status == 0 for r in res.records)
    assert res.levels[0].req_per_s == 0.0 and res.levels[0].error_rate == 1.0


def test_settings_from_mapping_rejects_unknown_and_coerces() -> None:
    s = LoadSettings.from_mapping({"concurrency": [1, 8], "mode": "open", "rate": 5})
    assert s.concurrency == (1, 8) and s.mode == "open"
    assert s.as_params()["concurrency"] == "1,8"
    with pytest.raises(ValueError, match="concurency"):
        LoadSettings.from_mapping({"concurency": [1]})
    with pytest.raises(ValueError, match="mode"):
        LoadSettings(mode="burst")  # type: ignore[arg-type]


async def test_auto_ladder_doubles_and_says_why_it_stopped(server: tuple[str, Behaviour]) -> None:
    url, b = server
    b.delay = lambda n, t: 0.02
    res = await run_load(url, tiny(concurrency=(2,), ladder="auto", max_concurrency=8), QuerySource.from_dirs())
    steps = [lv.concurrency for lv in res.levels]
    assert steps == [2, 4, 8][: len(steps)] and len(steps) >= 2  # doubling from the first level, capped at 8
    assert res.stop_reason is not None
    assert res.stop_reason.startswith(("saturated", "max_concurrency 8 reached"))
    assert b.peak <= 8
    for lv in res.levels:
        assert lv.req_per_s_low <= lv.req_per_s <= lv.req_per_s_high
        assert lv.goodput_per_s == lv.req_per_s  # 20 ms answers: all within the 1.5 s objective


async def test_repeats_and_a_stopping_hook(server: tuple[str, Behaviour]) -> None:
    url, b = server
    b.delay = lambda n, t: 0.01
    res = await run_load(url, tiny(concurrency=(2, 4), repeats=2), QuerySource.from_dirs(), None, lambda lv: True)
    assert [lv.concurrency for lv in res.levels] == [2]  # the hook stopped the run after the first level
    assert res.stop_reason is not None and "pruned" in res.stop_reason
    level = res.levels[0]
    assert level.repeats == 2 and {r.repeat for r in res.records} == {0, 1}
    assert level.req_per_s_low <= level.req_per_s <= level.req_per_s_high
    assert level.windows >= 2 * 3  # both repeats' windows (min_windows 3 each)


async def test_query_fields_go_into_every_query(server: tuple[str, Behaviour]) -> None:
    url, b = server
    load = tiny(concurrency=(2,), query_fields={"includePolicy": True, "includeOwnership": True})
    res = await run_load(url, load, QuerySource.from_dirs(seed=3))
    assert res.levels[0].requests > 0 and b.bodies
    assert all(q["includePolicy"] is True and q["includeOwnership"] is True and q["maxVisits"] == 7 for q in b.bodies)
    with pytest.raises(ValueError, match="maxVisits"):
        tiny(query_fields={"maxVisits": 3})
