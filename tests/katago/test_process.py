"""kill -9 of the real KataGo under load, through `python -m kgserve`: every request gets an answer, the pool
restarts the engine and /readyz is ready again (tests/kgserve/http/test_process.py does the same with the sim)."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import httpx
import pytest

from tests.helpers.processes import long_query, wait_for
from tests.katago.conftest import RealKatago, start_kgserve, tier_config
from tests.kgserve.http.conftest import gone

pytestmark = [pytest.mark.katago, pytest.mark.slow]

LONG = 4  # endless searches in flight when the engine is killed
SHORT_CLIENTS = 3  # clients sending short queries back to back, before, during and after the kill
ANALYSIS_THREADS = LONG + SHORT_CLIENTS + 1  # the short queries never wait behind the endless ones


def _restarted_and_ready(url: str) -> bool:
    readyz = httpx.get(url + "/readyz", timeout=10).json()
    return bool(readyz["ready"]) and readyz["engines"][0]["restarts"] == 1


def test_kill_9_of_the_engine_mid_load(tmp_path: Path, real_katago: RealKatago) -> None:
    config = tier_config(
        tmp_path, real_katago, cfg={"numAnalysisThreads": ANALYSIS_THREADS}, limits={"max_visits": 10_000_000}
    )
    process = start_kgserve(config)
    try:
        url = process.wait_listening()  # already listening: its address
        (engine_pid,) = process.child_pids()
        answers: list[tuple[str, httpx.Response]] = []
        failures: list[BaseException] = []
        stop = threading.Event()

        def send(caller_id: str, visits: int) -> None:
            try:
                answers.append(
                    (caller_id, httpx.post(url + "/analysis", content=long_query(caller_id, visits), timeout=60))
                )
            except BaseException as exc:  # a request without an answer fails the test below
                failures.append(exc)

        def short_client(k: int) -> None:
            n = 0
            while not stop.is_set():
                send(f"s{k}-{n}", 30)
                n += 1

        threads = [threading.Thread(target=send, args=(f"long{k}", 1_000_000)) for k in range(LONG)]
        threads += [threading.Thread(target=short_client, args=(k,)) for k in range(SHORT_CLIENTS)]
        for thread in threads:
            thread.start()
        wait_for(lambda: len(answers) >= 2 * SHORT_CLIENTS, 60, "short queries answered before the kill")
        os.kill(engine_pid, signal.SIGKILL)
        wait_for(lambda: gone(engine_pid), 10, "the engine to die")
        wait_for(lambda: _restarted_and_ready(url), 60, "the restarted engine to be ready")  # clients keep sending
        answered_before_restart = len(answers)
        wait_for(lambda: len(answers) >= answered_before_restart + SHORT_CLIENTS, 60, "answers after the restart")
        stop.set()
        for thread in threads:
            thread.join(90)
        assert not failures, failures
        assert not any(thread.is_alive() for thread in threads)

        outcomes = {"ok": 0, "died": 0, "unavailable": 0}
        for caller_id, response in answers:
            lines = [json.loads(raw) for raw in response.content.splitlines()]
            assert lines and all(line["id"] == caller_id for line in lines), response.text
            if response.status_code == 200:
                assert [line["isDuringSearch"] for line in lines] == [False], response.text
                outcomes["ok"] += 1
            else:
                assert response.status_code == 503, response.text
                (line,) = lines
                died = line["error"].startswith("engine died before finishing this query")
                assert died or line["error"].startswith("engine unavailable"), line
                outcomes["died" if died else "unavailable"] += 1
        long_answers = [response for caller_id, response in answers if caller_id.startswith("long")]
        assert len(long_answers) == LONG and all(r.status_code == 503 for r in long_answers)
        assert outcomes["ok"] >= 3 * SHORT_CLIENTS, outcomes

        readyz = httpx.get(url + "/readyz", timeout=10).json()
        (engine,) = readyz["engines"]
        assert readyz["ready"] is True and engine["restarts"] == 1 and engine["pid"] != engine_pid
        after = httpx.post(url + "/analysis", content=long_query("after", 20), timeout=60)
        assert after.status_code == 200 and json.loads(after.content)["rootInfo"]["visits"] == 20
    finally:
        process.stop()
