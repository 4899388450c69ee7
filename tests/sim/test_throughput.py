"""The throughput model: a real optimum for every swept key, and the timed simulation agrees with it."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from kgserve.sim.throughput import SharedDevice, SimParams, predict_throughput, steady_state
from tests.sim.conftest import Sim, sim_env, write_cfg

BASE: dict[str, Any] = {
    "numAnalysisThreads": 64,
    "numSearchThreadsPerAnalysisThread": 2,
    "nnMaxBatchSize": 128,
    "numNNServerThreadsPerModel": 2,
    "nnCacheSizePowerOfTwo": 20,
}
GRIDS = {
    "numAnalysisThreads": [4, 8, 16, 32, 64, 128, 256, 512],
    "numSearchThreadsPerAnalysisThread": [1, 2, 4, 8, 16],
    "nnMaxBatchSize": [16, 32, 64, 128, 256, 512],
    "numNNServerThreadsPerModel": [1, 2, 3, 4, 6, 8],
    "nnCacheSizePowerOfTwo": [12, 14, 16, 18, 20, 22, 24],
}


@pytest.mark.parametrize("key", sorted(GRIDS))
def test_each_key_has_an_interior_optimum(key: str) -> None:
    rates = [predict_throughput({**BASE, key: value}, 500, 512) for value in GRIDS[key]]
    best = max(range(len(rates)), key=rates.__getitem__)
    assert 0 < best < len(rates) - 1, (key, rates)
    assert rates[best] > 1.02 * min(rates[0], rates[-1]), (key, rates)


def test_joint_optimum_beats_the_hand_written_default() -> None:
    best = max(
        predict_throughput({**BASE, "numAnalysisThreads": a, "numSearchThreadsPerAnalysisThread": t}, 500, 512)
        for a in (16, 32, 64, 128, 256)
        for t in (1, 2, 4)
    )
    assert best > predict_throughput(BASE, 500, 512) * 1.02


def test_shape_of_the_model() -> None:
    one = [steady_state(SimParams(1, t, max(16, t), 1, 20), 1).visits_per_search for t in (1, 2, 4, 8)]
    assert one == sorted(one) and one[-1] > 3 * one[0]  # more threads in flight: bigger batches
    single = steady_state(SimParams(1, 64, 64, 1, 20), 1)
    assert single.device_util < 0.8  # one search cannot fill the device
    assert predict_throughput({**BASE, "nnMaxBatchSize": 4096}, 500, 512) == 0.0  # does not fit the device
    assert predict_throughput(BASE, 100, 512) > 3 * predict_throughput(BASE, 500, 512)


def test_shared_device_serialises_reservations() -> None:
    name = f"unit-{uuid.uuid4().hex[:8]}"
    first, second = SharedDevice(name), SharedDevice(name)
    s1, e1 = first.reserve(0.5)
    s2, e2 = second.reserve(0.5)
    assert s2 >= e1 - 1e-6 and e2 - s2 == pytest.approx(0.5)
    first.release(e1, s1)  # not the last reservation any more: nothing is given back
    s3, _ = SharedDevice(name).reserve(0.1)
    assert s3 >= e2 - 1e-6
    private_start, _ = SharedDevice("private").reserve(0.5)
    assert private_start < e1
    first.path.unlink()


def _measure(tmp_path: Path, cfg_values: dict[str, Any], visits: int, count: int, speed: float) -> float:
    cfg = write_cfg(tmp_path, **cfg_values)
    sim = Sim(cfg, sim_env(speed))
    try:
        sim.send('{"id":"ready","action":"query_version"}')
        assert sim.readline()["id"] == "ready"
        start = time.monotonic()
        for i in range(count):  # distinct positions: no cache hits
            moves = [["B", f"{'ABCDEFGHJKLMNOPQRST'[i % 19]}{1 + i // 19}"]]
            query = {
                "id": f"q{i}",
                "moves": moves,
                "rules": "chinese",
                "komi": 7.5,
                "boardXSize": 19,
                "boardYSize": 19,
                "maxVisits": visits,
            }
            sim.send(json.dumps(query))
        for _ in range(count):
            assert sim.readline()["isDuringSearch"] is False
        elapsed = time.monotonic() - start
        run = sim.finish()
        assert run.returncode == 0
        return count / (elapsed * speed)
    finally:
        sim.kill()


@pytest.mark.slow
@pytest.mark.parametrize(
    "cfg_values",
    [
        {"numAnalysisThreads": 8, "numSearchThreadsPerAnalysisThread": 2, "nnMaxBatchSize": 16},
        {
            "numAnalysisThreads": 32,
            "numSearchThreadsPerAnalysisThread": 1,
            "nnMaxBatchSize": 32,
            "numNNServerThreadsPerModel": 2,
        },
    ],
)
def test_timed_simulation_matches_prediction(tmp_path: Path, cfg_values: dict[str, Any]) -> None:
    visits, count = 200, 96
    predicted = predict_throughput(cfg_values, visits, count)
    speed = count / (predicted * 1.5)  # about 1.5 s of wall time, so the sim's own CPU time is noise
    measured = _measure(tmp_path, cfg_values, visits, count, speed=speed)
    assert measured == pytest.approx(predicted, rel=0.25)
