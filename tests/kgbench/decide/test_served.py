"""Promote writes the serving settings its winner was measured with, or says which served one differs (issue 33)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kgbench.decide import promote as promote_mod
from kgbench.targets.serving import Change, changes_json, for_load_generator, serving_params, serving_settings
from kgbench.track.schema import SERVING_CHANGES
from kgserve.settings import load_settings

from .conftest import Store

OK = {"errors": 0, "timeouts": 0, "p50_ms": 300.0, "p99_ms": 400.0, "req_per_s": 10.0}


def _plant(store: Store, runtime: Path, *, widened: dict[str, Any] | None = None, **measured: Any) -> str:
    """A job of `runtime`'s own runtime whose kgserve ran with the runtime's settings (`measured` over them);
    `widened`: limits a kgbench before issue 40 widened for its load generator, recorded as its changes."""
    data = load_settings(runtime).model_dump(mode="json")
    changes = for_load_generator(data)
    for key, value in (widened or {}).items():
        section, name = key.split(".")
        changes.append(Change(key, data[section][name], value, "one client (the load generator) with 1024 queries"))
        data[section][name] = value
    values = {**serving_settings(data), **measured}
    store.sweep("s1")
    return store.job(
        "s1",
        "job",
        backend="cuda",
        metrics=OK,
        params={**serving_params(values), "engines": str(values["engine.processes"])},
        tags={SERVING_CHANGES: changes_json(changes), "kgbench.runtime_config": str(runtime)},
    )


def _promote(store: Store, *args: str) -> int:
    return promote_mod.main(["--tracking-uri", store.uri, *args])


def test_in_place_a_served_setting_that_is_not_the_measured_one_is_named(
    store: Store, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant(store, config_path, **{"engine.thread_reserve": 0.0})
    assert _promote(store, "--config", str(config_path)) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("wrote "))
    assert "SERVED SETTINGS DIFFER from the measured: engine.thread_reserve 0.0625 (measured: 0.0)" in line
    assert f"check it with: python -m kgbench.promote --verify --config {config_path}" in line


def test_in_place_the_measured_engine_count_is_written_and_the_rest_is_as_measured(
    store: Store, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant(store, config_path, **{"engine.processes": 2, "engine.min_ready": 2})
    before = yaml.safe_load(config_path.read_text())
    assert _promote(store, "--config", str(config_path)) == 0
    out = capsys.readouterr().out
    # issue 40: the job changed nothing but its load generator's port: every limit served is the measured one
    assert "; serving settings as measured;" in out and "DIFFER" not in out
    assert "serve it with" in out
    after = yaml.safe_load(config_path.read_text())
    assert after["engine"]["processes"] == 2 and after["engine"]["backend"] == "cuda"
    before["engine"]["processes"] = 2
    # and the tie to the cfg written with it (kgserve.servedcfg)
    before["engine"].update({k: after["engine"][k] for k in ("cfg_run_id", "cfg_sha256")})
    assert after == before  # nothing else changed


def test_a_scratch_runtime_gets_the_measured_settings_and_limits_an_older_job_widened_are_named(
    store: Store, config_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # measured when runtime/config.yaml said deadline 60 s, by a kgbench before issue 40 that widened the per-client
    # caps and lifted the pacing for its one-client load at 1024: the scratch runtime serves what was measured but
    # those, and the line says the runtime serves them narrower
    widened = {"limits.max_inflight_per_client": 1040, "limits.max_connections_per_client": 1040,
               "limits.max_requests_per_s_per_client": 0}  # fmt: skip
    run_id = _plant(store, config_path, widened=widened, **{"limits.deadline_s": 60.0})
    scratch = tmp_path / "mine"
    assert _promote(store, "--config", str(config_path), "--runtime-dir", str(scratch)) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("wrote "))
    served = load_settings(scratch / "config.yaml")
    assert served.limits.deadline_s == 60.0
    recorded = store.client.get_run(run_id).data.params
    runtime_caps = load_settings(config_path).limits
    assert served.limits.max_inflight_per_client == runtime_caps.max_inflight_per_client
    assert int(recorded["serve.limits.max_inflight_per_client"]) > served.limits.max_inflight_per_client
    assert "SERVED LIMITS DIFFER from the measured: the job (a kgbench before issue 40) widened them" in line
    assert (
        "limits.max_inflight_per_client 512 (measured: 1040" in line and "limits.max_connections_per_client 64" in line
    )
    assert "limits.max_requests_per_s_per_client 1000 (measured: 0" in line
    assert served.server.port == 9100  # the load generator's port is not the runtime's


def test_a_run_from_before_the_settings_were_recorded_says_so(
    store: Store, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store.sweep("old")
    store.job("old", "job", backend="cuda", metrics=OK)
    assert _promote(store, "--config", str(config_path)) == 0
    assert "its serving settings were not recorded" in capsys.readouterr().out
