"""Promotion into a scratch runtime: a simulated winner never rewrites the tracked runtime files."""

from __future__ import annotations

from pathlib import Path

import pytest

import kgserve.settings
from kgbench.decide import promote as promote_mod
from kgbench.decide import scratch
from kgbench.track.schema import PROMOTED_SCRATCH
from kgserve.provenance import read_provenance
from kgserve.settings import load_settings

from .conftest import Store

OK = {"errors": 0, "timeouts": 0, "p50_ms": 300.0, "p99_ms": 100.0}
SIM_TAGS = {"simulated": "true", "katago_version": "1.17.2-sim"}


@pytest.fixture
def tracked(config_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The default runtime config (what `promote` reads without --config) is a copy in tmp_path, with a
    cfg promoted earlier from a real run; the default scratch folder is in tmp_path too."""
    monkeypatch.setattr(kgserve.settings, "DEFAULT_CONFIG_PATH", config_path)
    monkeypatch.setattr(scratch, "DEFAULT_SCRATCH_DIR", tmp_path / "runtime" / "scratch")
    (config_path.parent / "katago_serving.cfg").write_text("# promoted from a real sweep\nnnMaxBatchSize = 64\n")
    return config_path


def test_simulated_winner_goes_to_the_scratch_runtime(
    store: Store, tracked: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store.sweep("real")
    real = store.job("real", "real", backend="cuda", metrics={**OK, "req_per_s": 5}, tags={"promoted": "true"})
    store.sweep("sim1")
    sim = store.job("sim1", "sim", backend="sim", metrics={**OK, "req_per_s": 9}, tags=SIM_TAGS)
    runtime = tracked.parent
    before = {path.name: path.read_bytes() for path in runtime.iterdir() if path.is_file()}

    assert promote_mod.main(["--tracking-uri", store.uri, "--allow-simulated"]) == 0

    assert {path.name: path.read_bytes() for path in runtime.iterdir() if path.is_file()} == before
    out = capsys.readouterr().out
    scratch_config = runtime / "scratch" / "config.yaml"
    assert f"serve it with: python -m kgserve --config {scratch_config}" in out
    served = load_settings(scratch_config)
    assert served.engine.backend == "sim"
    assert served.engine.cfg == runtime / "scratch" / "katago_serving.cfg"
    assert served.server.port == load_settings(tracked).server.port
    assert served.engine.model_for("sim") == load_settings(tracked).engine.model_for("sim")
    provenance = read_provenance(served.engine.cfg)
    assert provenance is not None and provenance.simulated and provenance.run_id == sim
    tags = store.client.get_run(sim).data.tags
    assert tags[PROMOTED_SCRATCH] == str(scratch_config)
    assert tags["promoted"] == "scratch"  # what the saved view shows: promoted, into a scratch runtime
    assert store.client.get_run(real).data.tags["promoted"] == "true"  # still what runtime/ serves


def test_simulated_runs_never_go_into_a_named_gpu_config(
    store: Store, tracked: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A named config that serves a GPU build is another runtime than the sim's: refused, nothing written."""
    store.sweep("sim1")
    store.job("sim1", "sim", backend="sim", metrics={**OK, "req_per_s": 9}, tags=SIM_TAGS)
    before = tracked.read_bytes()
    assert promote_mod.main(["--tracking-uri", store.uri, "--allow-simulated", "--config", str(tracked)]) == 1
    err = capsys.readouterr().err
    assert "promote will not cross runtimes" in err and "serves cuda (GPU)" in err and "sim (simulated)" in err
    assert tracked.read_bytes() == before and not (tracked.parent / "scratch").exists()


def test_a_second_scratch_promotion_takes_the_tag_over(store: Store, tracked: Path) -> None:
    store.sweep("sim1")
    first = store.job("sim1", "a", backend="sim", metrics={**OK, "req_per_s": 9}, tags=SIM_TAGS)
    assert promote_mod.main(["--tracking-uri", store.uri, "--allow-simulated"]) == 0
    store.sweep("sim2")
    second = store.job("sim2", "b", backend="sim", metrics={**OK, "req_per_s": 9}, tags=SIM_TAGS)
    assert promote_mod.main(["--tracking-uri", store.uri, "--allow-simulated"]) == 0
    assert store.client.get_run(first).data.tags["promoted"] == "false"
    assert store.client.get_run(second).data.tags["promoted"] == "scratch"


def test_runtime_dir_keeps_a_real_promotion_out_of_the_config(store: Store, tracked: Path, tmp_path: Path) -> None:
    store.sweep("s1")
    winner = store.job("s1", "w", backend="trt", metrics={**OK, "req_per_s": 12})
    before = tracked.read_bytes()
    target = tmp_path / "elsewhere"
    argv = ["--tracking-uri", store.uri, "--config", str(tracked), "--runtime-dir", str(target)]
    assert promote_mod.main(argv) == 0
    assert tracked.read_bytes() == before
    served = load_settings(target / "config.yaml")
    assert served.engine.backend == "trt" and served.engine.cfg == target / "katago_serving.cfg"
    provenance = read_provenance(served.engine.cfg)
    assert provenance is not None and provenance.run_id == winner and not provenance.simulated
    # a second promotion into the same folder replaces both files
    assert promote_mod.main(argv) == 0
    assert load_settings(target / "config.yaml").engine.backend == "trt"
