"""kgserve as a process, with the simulated engine: crash and restart, graceful shutdown, no orphans.

Each test starts its own `python -m kgserve` (port 0) and looks at the process table with psutil.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import SIM_MODEL
from tests.helpers.processes import long_query, wait_for

pytestmark = pytest.mark.slow


def refused(url: str) -> bool:
    """True when a new connection to kgserve is refused (it closed its listening socket)."""
    try:
        httpx.get(url + "/healthz", timeout=5)
    except httpx.ConnectError:
        return True
    except httpx.HTTPError:  # accepted just before the close, then dropped: not refused yet
        return False
    return False


def start(
    tmp_path: Path,
    config_writer: Any,
    kgserve_process: Any,
    env: dict[str, str] | None = None,
    sections: dict[str, Any] | None = None,
) -> Any:
    sections = {"limits": {"max_visits": 10_000_000}, **(sections or {})}
    config = config_writer(tmp_path, **sections)
    process = kgserve_process(config, env)
    process.wait_listening()
    process.wait_ready()
    return process


def test_engine_sigkill_gives_503_then_recovers(
    tmp_path: Path, config_writer: Any, kgserve_process: Any, process_gone: Any
) -> None:
    process = start(
        tmp_path,
        config_writer,
        kgserve_process,
        {"KGSERVE_SIM_SPEED": "20"},
        # the restart waits 4 s: /readyz is read once the clients have their 503s (well under a second, but a
        # loaded machine stretches it), and must still see the engine down
        {"engine": {"restart_backoff_initial_s": 4.0}},
    )
    try:
        (engine_pid,) = process.child_pids()
        results: list[httpx.Response] = []

        def client(k: int) -> None:
            results.append(httpx.post(process.url + "/analysis", content=long_query(f"c{k}"), timeout=60))

        threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for thread in threads:
            thread.start()
        wait_for(lambda: "kgserve_inflight_queries 8.0" in httpx.get(process.url + "/metrics").text, 20, "8 in flight")
        killed_at = time.monotonic()
        os.kill(engine_pid, signal.SIGKILL)
        for thread in threads:
            thread.join(30)
        answered_in = time.monotonic() - killed_at
        assert len(results) == 8
        for response in results:
            assert response.status_code == 503, response.text
            (line,) = [json.loads(raw) for raw in response.content.splitlines()]
            assert line["error"].startswith("engine died before finishing this query")
            assert line["id"].startswith("c")
        assert answered_in < 5
        readyz = httpx.get(process.url + "/readyz", timeout=10)
        assert readyz.status_code == 503 and readyz.json()["reason"]
        process.wait_ready(30)
        readyz = httpx.get(process.url + "/readyz", timeout=10).json()
        assert readyz["engines"][0]["restarts"] == 1 and readyz["engines"][0]["pid"] != engine_pid
        assert process_gone(engine_pid)
        after = httpx.post(process.url + "/analysis", content=long_query("after", 10), timeout=30)
        assert after.status_code == 200 and json.loads(after.content)["id"] == "after"
    finally:
        process.stop()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_lets_in_flight_finish_then_stops_the_engine(
    tmp_path: Path, config_writer: Any, kgserve_process: Any, process_gone: Any, signum: int
) -> None:
    process = start(
        tmp_path, config_writer, kgserve_process, {"KGSERVE_SIM_SPEED": "20"}, {"server": {"grace_period_s": 20}}
    )
    engine_pids = process.child_pids()
    assert engine_pids
    results: list[httpx.Response] = []
    # a query that takes seconds on the simulated engine at this speed
    thread = threading.Thread(
        target=lambda: results.append(
            httpx.post(process.url + "/analysis", content=long_query("inflight", 20_000), timeout=60)
        )
    )
    thread.start()
    wait_for(lambda: "kgserve_inflight_queries 1.0" in httpx.get(process.url + "/metrics").text, 20, "in flight")
    process.proc.send_signal(signum)
    # no longer accepting: polled (a fixed 0.5 s wait may be too short on a loaded machine), while the query runs
    wait_for(lambda: refused(process.url), 20, "kgserve to stop accepting connections")
    assert thread.is_alive(), "the query was too short to be in flight during the shutdown"
    thread.join(40)
    assert process.proc.wait(40) == 0, "\n".join(process.lines()[-30:])
    (response,) = results
    assert response.status_code == 200, response.text
    line = json.loads(response.content)
    assert line["id"] == "inflight" and line["isDuringSearch"] is False and "noResults" not in line
    wait_for(lambda: all(process_gone(pid) for pid in engine_pids), 10, "the engine to exit")
    with pytest.raises(httpx.ConnectError):
        httpx.get(process.url + "/healthz", timeout=5)
    process.stop()


def test_kill_9_of_kgserve_leaves_no_engine(
    tmp_path: Path, config_writer: Any, kgserve_process: Any, process_gone: Any
) -> None:
    process = start(tmp_path, config_writer, kgserve_process, None, {"engine": {"processes": 2}})
    engine_pids = process.child_pids()
    assert len(engine_pids) == 2
    process.proc.send_signal(signal.SIGKILL)
    process.proc.wait(10)
    wait_for(lambda: all(process_gone(pid) for pid in engine_pids), 10, "the engines to die with kgserve")
    process.stop()


def test_crash_loop_keeps_kgserve_up_and_not_ready(tmp_path: Path, config_writer: Any, kgserve_process: Any) -> None:
    """With engine.stay_up_on_engine_refusal (without it kgserve exits 3: tests/kgserve/http/test_cfg_startup.py)."""
    model = tmp_path / "kgsim.bin.gz"
    model.write_bytes(SIM_MODEL.read_bytes())
    process = start(
        tmp_path,
        config_writer,
        kgserve_process,
        None,
        {
            "engine.backends.sim": {"model": str(model)},
            "engine": {
                "restart_backoff_initial_s": 0.2,
                "restart_backoff_max_s": 1.0,
                "stay_up_on_engine_refusal": True,
            },
        },
    )
    try:
        (engine_pid,) = process.child_pids()
        model.unlink()
        os.kill(engine_pid, signal.SIGKILL)
        wait_for(lambda: "refused" in (httpx.get(process.url + "/readyz").json()["reason"] or ""), 30, "the refusal")
        readyz = httpx.get(process.url + "/readyz", timeout=10)
        assert readyz.status_code == 503
        document = readyz.json()
        assert document["ready"] is False and "refused to start 3 times in a row" in document["reason"]
        assert any(document["engines"][0]["last_stderr"])
        assert httpx.get(process.url + "/healthz").status_code == 200
        refused = httpx.post(process.url + "/analysis", content=long_query("x", 10), timeout=10)
        assert refused.status_code == 503
        import psutil

        cpu = psutil.Process(process.proc.pid).cpu_percent(interval=2.0)
        assert cpu < 50, f"kgserve burns {cpu}% CPU in a crash loop"
        assert process.proc.poll() is None
    finally:
        process.stop()


def test_shutdown_cuts_what_outlives_the_grace_period(
    tmp_path: Path, config_writer: Any, kgserve_process: Any, process_gone: Any
) -> None:
    process = start(
        tmp_path, config_writer, kgserve_process, {"KGSERVE_SIM_SPEED": "20"}, {"server": {"grace_period_s": 1}}
    )
    engine_pids = process.child_pids()
    results: list[httpx.Response] = []

    def client() -> None:
        results.append(httpx.post(process.url + "/analysis", content=long_query("endless"), timeout=60))

    thread = threading.Thread(target=client)
    thread.start()
    wait_for(lambda: "kgserve_inflight_queries 1.0" in httpx.get(process.url + "/metrics").text, 20, "in flight")
    stopped_at = time.monotonic()
    process.proc.send_signal(signal.SIGTERM)
    assert process.proc.wait(30) == 0, "\n".join(process.lines()[-30:])
    assert time.monotonic() - stopped_at < 10
    thread.join(10)
    (response,) = results
    assert response.status_code == 503
    assert json.loads(response.content) == {
        "error": "kgserve is shutting down: this query was terminated",
        "id": "endless",
    }
    wait_for(lambda: all(process_gone(pid) for pid in engine_pids), 10, "the engine to exit")
    assert any("outcome=cancelled" in line for line in process.lines())
    assert not any("Exception in ASGI application" in line for line in process.lines())
    process.stop()


def test_a_second_signal_stops_at_once_and_leaves_no_engine(
    tmp_path: Path, config_writer: Any, kgserve_process: Any, process_gone: Any
) -> None:
    """An impatient operator's second Ctrl-C: uvicorn then skips the app's shutdown; kgserve must still stop its
    engines and exit (it hung in the event loop's task cancellation, deaf to further signals)."""
    process = start(
        tmp_path, config_writer, kgserve_process, {"KGSERVE_SIM_SPEED": "20"}, {"server": {"grace_period_s": 60}}
    )
    engine_pids = process.child_pids()
    assert engine_pids
    results: list[Any] = []

    def client() -> None:
        try:
            results.append(httpx.post(process.url + "/analysis", content=long_query("endless"), timeout=60))
        except httpx.HTTPError as exc:  # the forced stop may cut the connection
            results.append(exc)

    thread = threading.Thread(target=client)
    thread.start()
    wait_for(lambda: "kgserve_inflight_queries 1.0" in httpx.get(process.url + "/metrics").text, 20, "in flight")
    process.proc.send_signal(signal.SIGINT)
    wait_for(lambda: refused(process.url), 20, "kgserve to stop accepting connections")
    process.proc.send_signal(signal.SIGINT)  # well inside the 60 s grace period: "now"
    assert process.proc.wait(30) == 0, "\n".join(process.lines()[-30:])
    wait_for(lambda: all(process_gone(pid) for pid in engine_pids), 10, "the engine to exit")
    thread.join(30)
    assert len(results) == 1
    assert any("without the grace period" in line for line in process.lines())
    process.stop()
