"""HAProxy in front of several kgserve: the cfg kgserve.haproxy writes, checked by haproxy itself, and a real
HAProxy on loopback over three real kgserve (sim engine): requests spread over the backends, a killed engine
or a killed kgserve loses no request, and a dead kgserve leaves the rotation."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from http import HTTPStatus
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.http11 import Request, Response

from benchmarks.common import free_port
from kgbench.targets.haproxy_proc import HAProxyProcess, haproxy_binary, with_balancer
from kgbench.targets.kgserve_process import engine_pids, kgserve_running
from kgbench.targets.sim import cleanup_devices, sim_env, sim_settings
from kgserve.haproxy import BACKEND_HEADER, kgserve_commands, render_cfg
from kgserve.settings import ConfigError, load_settings
from tests.conftest import REPO, analysis_query
from tests.helpers.http import metric

needs_haproxy = pytest.mark.skipif(haproxy_binary() is None, reason="haproxy is not installed (apt install haproxy)")


def test_cfg_follows_the_runtime_config() -> None:
    settings = with_balancer(load_settings(), 9000, [("127.0.0.1", 9101), ("10.0.0.7", 9100)], check_interval_s=0.5)
    text = render_cfg(settings)
    assert "balance leastconn" in text and "option httpchk GET /readyz" in text
    assert "bind 127.0.0.1:9000" in text
    assert "server kgserve0 127.0.0.1:9101 check" in text and "server kgserve1 10.0.0.7:9100 check" in text
    assert "inter 500ms fall 2 rise 2" in text
    response_ms = int((settings.limits.deadline_s + settings.server.grace_period_s + 10) * 1000)
    assert f"timeout server {response_ms}ms" in text and "timeout tunnel" in text
    # kgserve learns each client's address (server.trusted_proxies), never one the client wrote itself
    assert "http-request del-header X-Forwarded-For\n    option forwardfor\n" in text


@needs_haproxy
def test_haproxy_accepts_the_shipped_cfg(tmp_path: Path) -> None:
    out = tmp_path / "haproxy.cfg"
    write = subprocess.run(
        [sys.executable, "-m", "kgserve.haproxy", "write", "--output", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert write.returncode == 0, write.stderr
    check = subprocess.run([haproxy_binary() or "haproxy", "-c", "-f", str(out)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_commands_one_kgserve_per_gpu(tmp_path: Path) -> None:
    data = yaml.safe_load((REPO / "runtime" / "config.yaml").read_text())
    data["balancer"]["backends"] = [
        {"host": "127.0.0.1", "port": 9101, "gpu": "0"},
        {"host": "127.0.0.1", "port": 9102, "gpu": "1"},
        {"host": "node7", "port": 9100},
    ]
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(data))
    lines = kgserve_commands(load_settings(config), config)
    assert lines[0].startswith("CUDA_VISIBLE_DEVICES=0 python -m kgserve --config") and lines[0].endswith("--port 9101")
    assert lines[1].startswith("CUDA_VISIBLE_DEVICES=1 ") and lines[1].endswith("--port 9102")
    assert lines[2].startswith("# node7:9100")


def test_no_balancer_section_is_a_clear_error(tmp_path: Path) -> None:
    data = yaml.safe_load((REPO / "runtime" / "config.yaml").read_text())
    del data["balancer"]
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(data))
    run = subprocess.run(
        [sys.executable, "-m", "kgserve.haproxy", "--config", str(config), "write"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 2 and "no balancer: section" in run.stderr
    assert not (tmp_path / "haproxy.cfg").exists()


QUERY = {"rules": "tromp-taylor", "komi": 7.5, "boardXSize": 19, "boardYSize": 19, "moves": [], "maxVisits": 30}


async def _analyse(client: httpx.AsyncClient, url: str, i: int) -> tuple[int, str, str]:
    """(status, backend, the final line's id) of one analysis request."""
    try:
        response = await client.post(url + "/analysis", json={**QUERY, "id": f"r{i}"})
    except httpx.HTTPError as exc:
        return 0, "", f"{type(exc).__name__}: {exc}"
    if response.status_code != 200:
        return response.status_code, response.headers.get(BACKEND_HEADER, ""), response.text[:200]
    lines = [json.loads(line) for line in response.text.splitlines() if line.strip()]
    final: dict[str, object] = next((d for d in lines if d.get("isDuringSearch") is False), {})
    return response.status_code, response.headers.get(BACKEND_HEADER, ""), str(final.get("id"))


async def _burst(url: str, count: int, first: int) -> list[tuple[int, str, str]]:
    limits = httpx.Limits(max_connections=16)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        return await asyncio.gather(*(_analyse(client, url, first + i) for i in range(count)))


@pytest.mark.slow
@needs_haproxy
def test_three_kgserve_behind_haproxy(tmp_path: Path) -> None:
    settings = sim_settings(1)
    engine = settings.engine.model_copy(update={"restart_backoff_initial_s": 0.2, "restart_backoff_max_s": 1.0})
    settings = settings.model_copy(update={"engine": engine})
    try:
        with contextlib.ExitStack() as stack:
            servers = [
                stack.enter_context(kgserve_running(settings, sim_env(200.0, device=f"lb{os.getpid()}-{i}")))
                for i in range(3)
            ]
            ports = [int(str(s.url).rsplit(":", 1)[1]) for s in servers]
            balanced = with_balancer(settings, free_port(), [("127.0.0.1", p) for p in ports], check_interval_s=0.5)
            haproxy = HAProxyProcess(balanced, tmp_path)
            stack.callback(haproxy.stop)
            haproxy.start()
            assert all(haproxy.wait_status(f"kgserve{i}", "UP", 30) for i in range(3)), haproxy.backend_stats()

            # leastconn over three ready backends: a burst reaches all of them, each answer with its own id
            results = asyncio.run(_burst(haproxy.url, 48, 0))
            assert [r[0] for r in results] == [200] * 48, (results, haproxy.log_path.read_text()[-3000:])
            assert [r[2] for r in results] == [f"r{i}" for i in range(48)]
            assert {r[1] for r in results} == {"kgserve0", "kgserve1", "kgserve2"}

            # an engine killed under load (kgserve 0) and a whole kgserve killed (kgserve 1): no request lost.
            # HAProxy replays what was not delivered on another backend, but a request racing the kill can use
            # up its retries before the backend is marked down: then it gets a 503 (kgserve's or HAProxy's),
            # an answer the client can retry, never another request's answer. The one cut a balancer cannot
            # mend: an answer the SIGKILLed kgserve had already begun to send (status line relayed, then the
            # process is gone) reaches the client as an incomplete response; only a handful of those can exist
            # (the requests kgserve 1 was answering at the kill)
            async def chaos() -> list[tuple[int, str, str]]:
                burst = asyncio.create_task(_burst(haproxy.url, 60, 100))
                await asyncio.sleep(0.3)
                os.kill(engine_pids(servers[0])[0], signal.SIGKILL)
                servers[1].kill_tree()
                return await burst

            results = asyncio.run(chaos())
            assert {r[0] for r in results} <= {0, 200, 503}, (results, haproxy.log_path.read_text()[-5000:])
            cut = [r for r in results if r[0] == 0]
            assert len(cut) <= 4 and all(r[2].startswith(("RemoteProtocolError", "ReadError")) for r in cut), cut
            assert all(r[2] == f"r{100 + i}" for i, r in enumerate(results) if r[0] == 200)
            assert sum(r[0] == 200 for r in results) > 30, results  # most of them are replayed elsewhere

            # the dead kgserve leaves the rotation; the others take everything
            assert haproxy.wait_status("kgserve1", "DOWN", 30), haproxy.backend_stats()
            results = asyncio.run(_burst(haproxy.url, 24, 200))
            assert [r[0] for r in results] == [200] * 24
            assert "kgserve1" not in {r[1] for r in results}
            # kgserve 0 restarts its killed engine (backoff, then a fresh start: seconds on a loaded machine)
            _, ready = servers[0].wait_ready(timeout_s=30)
            assert ready.get("ready"), ready
    finally:
        cleanup_devices()


@pytest.mark.slow
@needs_haproxy
def test_websocket_passes_through(tmp_path: Path) -> None:
    """A WebSocket connection through the generated cfg: the Upgrade reaches the backend, messages flow both
    ways. The backend is a websockets echo server that answers /readyz like kgserve (kgserve has no WebSocket
    endpoint of its own; this checks HAProxy's side)."""

    def readyz(connection: ServerConnection, request: Request) -> Response | None:
        return connection.respond(HTTPStatus.OK, "ready\n") if request.path == "/readyz" else None

    async def echo(connection: ServerConnection) -> None:
        async for message in connection:
            await connection.send(f"echo {message if isinstance(message, str) else message.decode()}")

    async def scenario() -> list[str]:
        async with serve(echo, "127.0.0.1", 0, process_request=readyz) as server:
            port = server.sockets[0].getsockname()[1]
            settings = with_balancer(load_settings(), free_port(), [("127.0.0.1", port)], check_interval_s=0.2)
            haproxy = HAProxyProcess(settings, tmp_path)
            try:
                await asyncio.to_thread(haproxy.start)
                assert await asyncio.to_thread(haproxy.wait_status, "kgserve0", "UP", 30)
                async with connect(haproxy.url.replace("http://", "ws://") + "/ws") as ws:
                    replies = []
                    for text in ("a", "b"):
                        await ws.send(text)
                        reply = await asyncio.wait_for(ws.recv(), 10)
                        replies.append(reply if isinstance(reply, str) else reply.decode())
                    return replies
            finally:
                await asyncio.to_thread(haproxy.stop)

    assert asyncio.run(scenario()) == ["echo a", "echo b"]


def test_a_balancer_without_backends_is_a_clear_error(tmp_path: Path) -> None:
    data = yaml.safe_load((REPO / "runtime" / "config.yaml").read_text())
    data["balancer"]["backends"] = []
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"balancer\.backends"):
        load_settings(config)


@pytest.mark.slow
@needs_haproxy
def test_clients_behind_haproxy_are_told_apart(tmp_path: Path, kgserve_process: Any) -> None:
    """kgserve trusting the balancer (127.0.0.1) caps each client by the address HAProxy saw (the clients connect
    from 127.0.1.x), whatever X-Forwarded-For a client sends itself."""
    data = sim_settings(1).model_dump(mode="json")
    data["server"].update(trusted_proxies=["127.0.0.1"])
    data["limits"].update(max_inflight_per_client=1, hold_past_share_s=0.5)  # held 0.5 s past its share, then 429
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    server = kgserve_process(config, {"KGSERVE_SIM_SPEED": "1"})
    server.wait_listening()
    server.wait_ready()
    port = int(str(server.url).rsplit(":", 1)[1])
    haproxy = HAProxyProcess(with_balancer(load_settings(config), free_port(), [("127.0.0.1", port)]), tmp_path)
    small = json.dumps(analysis_query("small", size=9, max_visits=5))
    ponder = [json.dumps(analysis_query(f"p{i}", moves=[["B", "Q4"]], max_visits=10_000_000)) for i in range(2)]

    async def post(source: str, forged: str) -> httpx.Response:
        transport = httpx.AsyncHTTPTransport(local_address=source)
        async with httpx.AsyncClient(transport=transport, timeout=60) as client:
            return await client.post(haproxy.url + "/analysis", content=small, headers={"x-forwarded-for": forged})

    async def scenario() -> None:
        ws_url = haproxy.url.replace("http://", "ws://") + "/ws"
        headers = {"X-Forwarded-For": "203.0.113.1"}
        async with (
            connect(ws_url, local_addr=("127.0.1.9", 0), open_timeout=30) as bystander,
            connect(ws_url, additional_headers=headers, local_addr=("127.0.1.7", 0), open_timeout=30) as ws,
        ):
            # another client with work in flight: the per-client caps engage only among clients that contend
            await bystander.send(ponder[0])
            async with asyncio.timeout(60):
                while metric(str(server.url), "kgserve_inflight_queries") < 1:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            for text in ponder:  # 127.0.1.7's one slot taken, its second query refused
                await ws.send(text)
            refusal: dict[str, Any] = {}
            async with asyncio.timeout(60):
                while "error" not in refusal:  # past the warning line of the clamped visits
                    refusal = json.loads(await ws.recv())
            assert refusal["id"] == "p1" and "limits.max_inflight_per_client" in refusal["error"], refusal
            same = await post("127.0.1.7", "203.0.113.50")  # it cannot claim to be someone else
            assert same.status_code == 429 and "limits.max_inflight_per_client" in same.text
            other = await post("127.0.1.8", "127.0.1.7")  # nor can another client claim to be it
            assert other.status_code == 200, other.text
            # a client on the balancer's own (trusted) address: what it wrote is dropped by HAProxy, not believed
            local = await post("127.0.0.1", "127.0.1.7")
            assert local.status_code == 200, local.text
            await ws.send(json.dumps({"id": "all", "action": "terminate_all"}))
            await bystander.send(json.dumps({"id": "all", "action": "terminate_all"}))

    try:
        haproxy.start()
        assert haproxy.wait_status("kgserve0", "UP", 30), haproxy.backend_stats()
        asyncio.run(scenario())
    finally:
        haproxy.stop()
        server.stop()
    assert " client=127.0.1.8 " in server.text() and "client=203.0.113" not in server.text()
