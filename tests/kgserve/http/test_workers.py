"""server.workers: several kgserve processes on one port, each with its share of the engines (kgserve.procs.workers)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from kgserve.procs.workers import parse_worker, worker_settings
from tests.conftest import analysis_query
from tests.kgserve.http.conftest import make_settings

QUERY = analysis_query("w", moves=[["B", "Q16"]])


def test_each_worker_gets_its_share() -> None:
    settings = make_settings(limits={"max_inflight_queries": 1000})
    settings = settings.model_copy(
        update={"engine": settings.engine.model_copy(update={"processes": 5, "min_ready": 3})}
    )
    shares = [worker_settings(settings, index, 2) for index in range(2)]
    assert [s.engine.processes for s in shares] == [3, 2]
    assert [s.engine.min_ready for s in shares] == [2, 2]
    assert [s.limits.max_inflight_queries for s in shares] == [500, 500]
    assert parse_worker("1/3") == (1, 3)
    for bad in ("3/3", "x", "1/", "-1/2"):
        with pytest.raises(ValueError):
            parse_worker(bad)


@pytest.mark.slow
def test_two_workers_share_the_port_and_stop_together(
    tmp_path: Path, config_writer: Any, kgserve_process: Any, process_gone: Any
) -> None:
    config = config_writer(tmp_path, server={"workers": 2}, engine={"processes": 2})
    process = kgserve_process(config)
    try:
        url = process.wait_listening()
        process.wait_ready()
        seen: set[tuple[int, ...]] = set()
        deadline = time.monotonic() + 60
        while len(seen) < 2 and time.monotonic() < deadline:
            with httpx.Client(timeout=10) as client:  # a new connection each time: the kernel spreads them
                response = client.get(url + "/readyz")
            if response.status_code == 200:  # a worker whose engine is up (the other may still be starting)
                seen.add(tuple(engine["pid"] for engine in response.json()["engines"]))
            time.sleep(0.02)
        assert len(seen) == 2 and all(len(pids) == 1 for pids in seen)  # each worker: one engine of its own
        for index in range(4):
            response = httpx.post(url + "/analysis", content=json.dumps({**QUERY, "id": f"w{index}"}), timeout=30)
            assert response.status_code == 200 and f'"id":"w{index}"' in response.text
        descendants = process.child_pids()
        assert len(descendants) >= 4  # two workers, each with its engine
    finally:
        process.proc.send_signal(signal.SIGTERM)
        process.stop()
    assert process.proc.returncode == 0
    assert all(process_gone(pid) for pid in descendants)


def test_more_workers_than_engines_is_a_startup_error(tmp_path: Path, config_writer: Any, kgserve_process: Any) -> None:
    config = config_writer(tmp_path, server={"workers": 3}, engine={"processes": 2})
    process = kgserve_process(config)
    try:
        assert process.proc.wait(60) == 2
    finally:
        process.stop()
    assert any("each worker needs an engine of its own" in line for line in process.lines())
