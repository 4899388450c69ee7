"""The serving settings inside a measurement (kgbench.targets.serving): what a job's kgserve changes from the
runtime's settings for its load generator, and nothing else; how they are recorded and compared."""

from __future__ import annotations

from typing import Any

from kgbench.targets.serving import (
    apply_serving,
    changes_from_json,
    changes_json,
    differences,
    for_load_generator,
    recorded,
    serving_line,
    serving_params,
    serving_settings,
)
from kgserve.settings import Settings, load_settings
from tests.conftest import REPO


def _runtime() -> Settings:
    return load_settings(REPO / "runtime" / "config.yaml")


def _changed(data: dict[str, Any], concurrency: int | None) -> dict[str, Any]:
    changes = for_load_generator(data, concurrency)
    return {c.key: (c.runtime, c.measured) for c in changes}


def test_a_small_load_changes_only_the_load_generators_connection() -> None:
    runtime = _runtime()
    data = runtime.model_dump(mode="json")
    # loopback and no token already; the per-client request rate (issue 36) is the load generator's to measure
    assert _changed(data, 16) == {"server.port": (9100, 0), "limits.max_requests_per_s_per_client": (1000, 0)}
    measured, served = serving_settings(data), serving_settings(runtime)
    assert [d.key for d in differences(served, measured)] == ["limits.max_requests_per_s_per_client", "server.port"]
    # the message-rate bounds count /ws lines, which the load generator never sends: the runtime's
    assert measured["websocket.max_messages_per_s"] == runtime.websocket.max_messages_per_s > 0
    assert measured["limits.max_messages_per_s_per_client"] == runtime.limits.max_messages_per_s_per_client > 0
    # the settings the sweep used to turn off or widen are the runtime's
    assert measured["engine.thread_reserve"] == runtime.engine.thread_reserve > 0
    assert measured["limits.max_inflight_per_client"] == runtime.limits.max_inflight_per_client
    assert measured["limits.max_connections_per_client"] == runtime.limits.max_connections_per_client
    assert measured["limits.memory_per_client_bytes"] == runtime.limits.memory_per_client_bytes
    assert measured["priority.classes"] is True and measured["server.workers"] == runtime.server.workers


def test_a_cap_one_client_would_pass_is_widened_to_what_the_load_needs_and_said() -> None:
    data = _runtime().model_dump(mode="json")
    changes = for_load_generator(data, 1024)
    by_key = {c.key: c for c in changes}
    # 1024 queries in flight from one client: past the per-client caps (512 queries, 64 connections), within the
    # server-wide 2048
    assert set(by_key) == {
        "server.port",
        "limits.max_inflight_per_client",
        "limits.max_connections_per_client",
        "limits.max_requests_per_s_per_client",
    }
    assert "request rate is what is measured" in by_key["limits.max_requests_per_s_per_client"].why
    inflight = by_key["limits.max_inflight_per_client"]
    assert inflight.runtime == 512 and inflight.measured == data["limits"]["max_inflight_per_client"] >= 1024
    assert "one client (the load generator) with 1024 queries in flight" in inflight.why
    assert by_key["limits.max_connections_per_client"].runtime == 64
    assert data["limits"]["max_inflight_queries"] == 2048 and data["engine"]["thread_reserve"] == 0.0625
    line = serving_line(changes, "runtime/config.yaml")
    assert "limits.max_inflight_per_client" in line and "(runtime: 512;" in line


def test_auth_and_a_public_host_are_the_load_generators_and_direct_leaves_the_front_end_out() -> None:
    data = _runtime().model_dump(mode="json")
    data["server"].update(host="0.0.0.0", auth_token_env="KG_TOKENS")
    assert _changed(data, None) == {
        "server.host": ("0.0.0.0", "127.0.0.1"),
        "server.port": (9100, 0),
        "server.auth_token_env": ("KG_TOKENS", None),
    }
    assert "front end" in serving_line([], "x", "direct")
    served = serving_settings(_runtime())
    measured = {**served, "limits.deadline_s": 1.0, "engine.thread_reserve": 0.0}
    assert [d.key for d in differences(served, measured, transport="direct")] == ["engine.thread_reserve"]


def test_recorded_settings_round_trip_through_mlflow_params_and_back_into_a_config() -> None:
    runtime = _runtime()
    settings = serving_settings(runtime)
    params = serving_params(settings)
    assert params["serve.engine.thread_reserve"] == "0.0625" and params["serve.server.trusted_proxies"] == "[]"
    files = ("serve.engine.cfg", "serve.engine.backends", "serve.engine.model")
    assert not any(key.startswith(files) for key in params)
    assert recorded({**params, "katago.nnMaxBatchSize": "8"}) == settings
    changes = for_load_generator(runtime.model_dump(mode="json"), 4096)
    assert changes_from_json(changes_json(changes)) == changes
    data = runtime.model_dump(mode="json")
    apply_serving(data, {**settings, "limits.deadline_s": 60.0, "engine.processes": 2, "engine.min_ready": 2})
    assert data["limits"]["deadline_s"] == 60.0 and data["engine"]["processes"] == 2
    assert data["engine"]["min_ready"] is None  # every engine: the config's own spelling
    assert data["engine"]["cfg"] == str(runtime.engine.cfg)  # files are never serving settings
