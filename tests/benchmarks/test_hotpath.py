"""The hot-path benchmark's parts: the bare server answers its size, the client counts and times answers, the
defences-off kgserve (issue 40) has every defence off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.hotpath import POLICY, workloads
from benchmarks.rig.bare_asgi import ndjson_line
from benchmarks.rig.client import closed_loop
from benchmarks.rig.servers import bare_server, defences_off, standin_settings
from kgbench.targets.kgserve_process import write_config
from kgbench.targets.sim import sim_settings
from kgserve.settings import load_settings


def test_ndjson_line_has_the_asked_size_and_is_json() -> None:
    for size in (64, 1168, 11207):
        line = ndjson_line(size)
        assert len(line) == size and line.endswith(b"\n")
        assert json.loads(line)["isDuringSearch"] is False


def test_workload_bodies_are_distinct_queries() -> None:
    single, _, policy, batch, game = workloads()
    bodies = single.make_bodies()
    assert len(set(bodies)) == len(bodies) >= 1000
    assert all(json.loads(b)["maxVisits"] == 1 for b in policy.make_bodies()[:5]) and POLICY["includePolicy"]
    first = batch.make_bodies()[0]
    assert batch.queries_per_request(first) == 256 == len({json.loads(x)["id"] for x in first.split(b"\n")})
    whole = game.make_bodies()[0]
    assert game.queries_per_request(whole) == len(json.loads(whole)["moves"]) + 1


@pytest.mark.slow
async def test_closed_loop_against_the_bare_server() -> None:
    with bare_server(512) as server:
        readings = iter([10.0, 12.5])  # the server's CPU seconds at the window's start and end
        result = await closed_loop(
            server.url + "/analysis", [b'{"id":"a"}', b'{"id":"b"}'], 4, 0.5, server_cpu=lambda: next(readings)
        )
        assert result.errors == 0 and result.ok > 0
        assert result.server_cpu_s == 2.5  # read once at each end of the measured window, not around warm-up
        assert len(result.latencies_ms) == result.ok and result.p50_ms <= result.p99_ms
        assert result.client_cpu_s > 0 and result.client_ceiling > 0
        assert await server.answer_bytes(b'{"id":"c"}') == 512
        assert server.cpu_s() > 0


def test_defences_off_turns_every_per_client_bound_and_safety_bound_off_and_nothing_else(tmp_path: Path) -> None:
    shipped = standin_settings(sim_settings(1))
    off = load_settings(write_config(defences_off(shipped), tmp_path, limits_as_given=True))  # what kgserve reads
    (tmp_path / "on").mkdir()
    on = load_settings(write_config(shipped, tmp_path / "on", limits_as_given=True))
    assert on.limits == shipped.limits and on.engine.thread_reserve == shipped.engine.thread_reserve  # as shipped
    assert shipped.limits.max_requests_per_s_per_client > 0 and shipped.engine.thread_reserve > 0
    assert (off.limits.max_requests_per_s_per_client, off.limits.max_messages_per_s_per_client) == (0, 0)
    assert off.limits.max_connections_per_client >= 1 << 20 and off.limits.max_inflight_per_client >= 1 << 20
    assert off.limits.memory_per_client_bytes >= 1 << 40 and off.engine.thread_reserve == 0.0
    assert off.engine.backends["sim"].command == shipped.engine.backends["sim"].command  # the stand-in still
    assert off.priority == shipped.priority and off.limits.deadline_s == shipped.limits.deadline_s
