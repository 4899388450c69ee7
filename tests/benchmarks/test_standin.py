"""The benchmark stand-in engine: KataGo's protocol with canned answers, alone and behind a real kgserve."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

from benchmarks.rig.servers import kgserve_server, standin_settings
from benchmarks.rig.standin_engine import answer_lines
from kgbench.targets.sim import cleanup_devices, sim_env, sim_settings
from kgserve.katago.protocol import READY_LINE

QUERY = {"id": "q", "moves": [["B", "Q16"], ["W", "D4"]], "rules": "tromp-taylor", "komi": 7.5}


def test_answer_lines_follow_the_query_shape() -> None:
    (small,) = (json.loads(line) for line in answer_lines({**QUERY, "maxVisits": 3}))
    assert small["id"] == "q" and small["turnNumber"] == 2 and len(small["moveInfos"]) == 3
    assert "ownership" not in small and "policy" not in small and small["isDuringSearch"] is False
    big = json.loads(answer_lines({**QUERY, "maxVisits": 500, "includeOwnership": True, "includePolicy": True})[0])
    assert len(big["moveInfos"]) == 11 and len(big["ownership"]) == 361 and len(big["policy"]) == 362
    turns = [json.loads(line)["turnNumber"] for line in answer_lines({**QUERY, "analyzeTurns": [0, 2]})]
    assert turns == [0, 2]


def test_the_process_speaks_the_protocol() -> None:
    lines = [
        {"id": "v", "action": "query_version"},
        {"id": "m", "action": "query_models"},
        {**QUERY, "maxVisits": 2},
        {"id": "t", "action": "terminate", "terminateId": "q"},
    ]
    stdin = b"".join(json.dumps(x).encode() + b"\n" for x in lines) + b"not json\n"
    argv = [sys.executable, "-m", "benchmarks.rig.standin_engine", "analysis", "-config", "x", "-model", "y"]
    done = subprocess.run(argv, input=stdin, capture_output=True, timeout=60, check=True)
    assert READY_LINE in done.stderr.decode() and "STAND-IN" in done.stderr.decode()
    out = [json.loads(line) for line in done.stdout.splitlines()]
    assert out[0]["action"] == "query_version" and "standin" in out[0]["version"]
    assert out[1]["models"][0]["name"] == "standin"
    assert out[2]["id"] == "q" and len(out[2]["moveInfos"]) == 2
    assert out[3] == lines[3] and "error" in out[4]
    assert subprocess.run(argv[:3], capture_output=True, timeout=60).returncode == 2


@pytest.mark.slow
def test_kgserve_serves_queries_from_the_standin() -> None:
    try:
        with kgserve_server(standin_settings(sim_settings(1)), sim_env(0, device="standin-test")) as server:
            body = json.dumps({**QUERY, "id": "mine", "maxVisits": 3, "includeOwnership": True}).encode()
            request = urllib.request.Request(server.url + "/analysis", data=body, method="POST")
            with urllib.request.urlopen(request, timeout=30) as response:
                (answer,) = [json.loads(line) for line in response.read().splitlines()]
            assert answer["id"] == "mine" and len(answer["moveInfos"]) == 3 and len(answer["ownership"]) == 361
    finally:
        cleanup_devices()
