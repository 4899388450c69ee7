"""A client that never reads its streamed response (issue 12, item 5), against `python -m kgserve --backend
sim`: its queries are terminated, its in-flight slots come back and it is dropped, long before its deadline,
while other clients are served."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import analysis_query

SLOW_READER = analysis_query(
    "hog", max_visits=100_000, reportDuringSearchEvery=0.02, includeOwnership=True, includePolicy=True
)
SMALL = b'{"id":"s","moves":[],"rules":"chinese","komi":7.5,"boardXSize":9,"boardYSize":9,"maxVisits":5}'


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, config_writer: Any, kgserve_process: Any) -> Iterator[Any]:
    config = config_writer(
        tmp_path_factory.mktemp("kgserve"),
        limits={"max_inflight_queries": 4, "min_report_interval_s": 0.02},  # a fast stream of partial lines
        server={"max_response_buffer_bytes": 262144, "send_timeout_s": 5},
    )
    process = kgserve_process(config, {"KGSERVE_SIM_SPEED": "1"})
    process.wait_listening()
    process.wait_ready()
    yield process
    process.stop()


def gauge(url: str, name: str) -> float:
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} in /metrics")


def never_reading_client(port: int, request_id: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    body = json.dumps(SLOW_READER).encode()
    head = (
        f"POST /analysis HTTP/1.1\r\nHost: x\r\nX-Deadline-Ms: 120000\r\nX-Request-ID: {request_id}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    return sock


def test_never_reading_clients_are_dropped_and_free_their_slots(server: Any) -> None:
    port = int(server.url.rsplit(":", 1)[1])
    hogs = [never_reading_client(port, f"hog{k}") for k in range(4)]  # every in-flight slot
    try:
        end = time.monotonic() + 60  # far below the 120 s deadline the hogs asked for
        while gauge(server.url, "kgserve_inflight_queries") > 0 or not all(
            any(f"request id=hog{k} " in line and "outcome=slow_client" in line for line in server.lines())
            for k in range(4)
        ):
            assert time.monotonic() < end, "a never-reading client still holds its slot:\n" + "\n".join(
                server.lines()[-20:]
            )
            time.sleep(0.2)
        assert gauge(server.url, "kgserve_engine_outstanding_visits") == 0
        served = httpx.post(server.url + "/analysis", content=SMALL, timeout=30)
        assert served.status_code == 200
        for sock in hogs:  # dropped: after what was in flight, the server's side is closed (EOF or reset)
            sock.settimeout(10)
            try:
                while sock.recv(65536):
                    pass
            except ConnectionResetError:
                pass
    finally:
        for sock in hogs:
            sock.close()


def test_sigterm_with_never_reading_clients_exits_cleanly(
    tmp_path_factory: pytest.TempPathFactory, config_writer: Any, kgserve_process: Any
) -> None:
    # a buffer big enough that kgserve does not drop them first: the shutdown meets blocked sends
    server = {"grace_period_s": 1, "max_response_buffer_bytes": 64 << 20, "send_timeout_s": 120}
    config = config_writer(tmp_path_factory.mktemp("kgserve"), server=server, limits={"min_report_interval_s": 0.02})
    process = kgserve_process(config, {"KGSERVE_SIM_SPEED": "1"})
    hogs: list[socket.socket] = []
    try:
        process.wait_listening()
        process.wait_ready()
        port = int(process.url.rsplit(":", 1)[1])
        hogs = [never_reading_client(port, f"term{k}") for k in range(3)]
        end = time.monotonic() + 30
        while gauge(process.url, "kgserve_inflight_queries") < 3:
            assert time.monotonic() < end
            time.sleep(0.1)
        time.sleep(12)  # the sim's partial lines fill the socket buffers: kgserve's sends now block
        process.stop()  # SIGTERM: the grace period runs out while the clients still read nothing
        assert process.proc.returncode == 0
        assert not any("Traceback" in line for line in process.lines()), "\n".join(process.lines()[-40:])
        cut = [line for line in process.lines() if "request id=term" in line]
        assert len(cut) == 3 and all("outcome=cancelled" in line for line in cut), cut
    finally:
        for sock in hogs:
            sock.close()
        process.stop()
