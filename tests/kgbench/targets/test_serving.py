"""The serving settings inside a measurement (kgbench.targets.serving): what a job's kgserve changes from the
runtime's settings for its load generator (its connection), and nothing else, at any level (issue 40: every limit
the runtime's); how they are recorded and compared."""

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


def _changed(data: dict[str, Any]) -> dict[str, Any]:
    changes = for_load_generator(data)
    return {c.key: (c.runtime, c.measured) for c in changes}


def test_a_load_changes_only_the_load_generators_connection() -> None:
    runtime = _runtime()
    data = runtime.model_dump(mode="json")
    # loopback and no token already: the port only; the per-client request rate (issue 36) is the runtime's
    assert _changed(data) == {"server.port": (9100, 0)}
    measured, served = serving_settings(data), serving_settings(runtime)
    assert [d.key for d in differences(served, measured)] == ["server.port"]
    assert measured["limits.max_requests_per_s_per_client"] == runtime.limits.max_requests_per_s_per_client > 0
    # the message-rate bounds count /ws lines, which the load generator never sends: the runtime's
    assert measured["websocket.max_messages_per_s"] == runtime.websocket.max_messages_per_s > 0
    assert measured["limits.max_messages_per_s_per_client"] == runtime.limits.max_messages_per_s_per_client > 0
    # the settings the sweep used to turn off or widen are the runtime's
    assert measured["engine.thread_reserve"] == runtime.engine.thread_reserve > 0
    assert measured["limits.max_inflight_per_client"] == runtime.limits.max_inflight_per_client
    assert measured["limits.max_connections_per_client"] == runtime.limits.max_connections_per_client
    assert measured["limits.memory_per_client_bytes"] == runtime.limits.memory_per_client_bytes
    assert measured["priority.classes"] is True and measured["server.workers"] == runtime.server.workers


def test_no_cap_is_widened_and_no_pacing_lifted_for_one_client_at_any_level() -> None:
    """Issue 40: a job at 512 or 1024 in flight from one client serves the runtime's limits as they are (kgserve's
    per-client caps and pacing are work-conserving: a lone client passes them), so served = measured."""
    runtime = _runtime()
    data = runtime.model_dump(mode="json")
    changes = for_load_generator(data)
    assert [c.key for c in changes] == ["server.port"]
    assert data["limits"] == runtime.model_dump(mode="json")["limits"]
    assert (runtime.limits.max_connections_per_client, runtime.limits.max_requests_per_s_per_client) == (64, 1000)
    assert serving_line(changes, "runtime/config.yaml") == (
        "the serving settings of runtime/config.yaml, except server.port 0 (runtime: 9100; a free port for the load "
        "generator)"
    )


def test_auth_and_a_public_host_are_the_load_generators_and_direct_leaves_the_front_end_out() -> None:
    data = _runtime().model_dump(mode="json")
    data["server"].update(host="0.0.0.0", auth_token_env="KG_TOKENS")
    assert _changed(data) == {
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
    data = runtime.model_dump(mode="json")
    data["server"]["auth_token_env"] = "KG_TOKENS"
    changes = for_load_generator(data)
    assert len(changes) == 2 and changes_from_json(changes_json(changes)) == changes
    data = runtime.model_dump(mode="json")
    apply_serving(data, {**settings, "limits.deadline_s": 60.0, "engine.processes": 2, "engine.min_ready": 2})
    assert data["limits"]["deadline_s"] == 60.0 and data["engine"]["processes"] == 2
    assert data["engine"]["min_ready"] is None  # every engine: the config's own spelling
    assert data["engine"]["cfg"] == str(runtime.engine.cfg)  # files are never serving settings
