"""`python -m kgbench.promote` against a real MLflow store with planted runs."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import yaml

from kgbench.decide import promote as promote_mod
from kgserve.provenance import read_provenance
from kgserve.settings import load_settings

from .conftest import Store

OK = {"errors": 0, "timeouts": 0, "p50_ms": 300.0}


def _plant_main_sweep(store: Store) -> dict[str, str]:
    store.sweep("s1")
    ids = {
        "fast_errors": store.job(
            "s1", "fast_errors", backend="trt", metrics={**OK, "req_per_s": 20, "p99_ms": 500, "errors": 3}
        ),
        "over_slo": store.job("s1", "over_slo", backend="cuda", metrics={**OK, "req_per_s": 15, "p99_ms": 2000}),
        "unstable": store.job(
            "s1",
            "unstable",
            backend="trt",
            metrics={**OK, "req_per_s": 14, "p99_ms": 600},
            tags={"kgbench.unstable": "true"},
        ),
        "failed": store.job(
            "s1", "failed", backend="trt", metrics={**OK, "req_per_s": 30, "p99_ms": 100}, status="FAILED"
        ),
        "winner": store.job(
            "s1",
            "winner",
            backend="trt",
            metrics={**OK, "req_per_s": 12, "p99_ms": 800},
            params={"katago.nnMaxBatchSize": "64"},
            cfg="# winner cfg\nnnMaxBatchSize = 64\nnumAnalysisThreads = 32\n",
        ),
        "tie_slower_p99": store.job(
            "s1",
            "tie",
            backend="cuda",
            metrics={**OK, "req_per_s": 12, "p99_ms": 900},
            params={"katago.nnMaxBatchSize": "32"},
        ),
    }
    return ids


def _main(store: Store, config: Path, *extra: str) -> int:
    return promote_mod.main(["--tracking-uri", store.uri, "--config", str(config), *extra])


def test_promote_picks_fastest_clean_run_within_slo(
    store: Store, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _plant_main_sweep(store)
    assert _main(store, config_path, "--slo-p99-ms", "1000", "--explain", "--diff") == 0
    out = capsys.readouterr().out
    assert "rule: among FINISHED runs" in out and "decision: " in out
    assert "unless its p99 is over 25% above some others'" in out
    assert (
        f"promoted run {ids['winner'][:8]}: trt nnMaxBatchSize=64 12.0 req/s, p99 800 ms, over "
        f"{ids['tie_slower_p99'][:8]} (cuda nnMaxBatchSize=32, 12.0 req/s) for the highest req/s among 2 runs tied "
        "within the noise (p99s alike)"
    ) in out
    for reason in ("3 errors", "p99 2000 ms > SLO 1000 ms", "unstable", "status FAILED", "WINNER"):
        assert reason in out
    cfg = config_path.parent / "katago_serving.cfg"
    prov = read_provenance(cfg)
    assert prov is not None and not prov.modified
    assert prov.run_id == ids["winner"]
    assert prov.sweep_id == "s1"
    assert prov.backend == "trt"
    assert prov.get("req_per_s") == "12" and prov.get("p99_ms") == "800"
    assert prov.get("katago_version") == "1.16.3"
    assert prov.simulated is False
    assert cfg.read_text().endswith("# winner cfg\nnnMaxBatchSize = 64\nnumAnalysisThreads = 32\n")
    assert "+# kgbench-promote: run_id = " + ids["winner"] in out  # the diff against the (absent) old cfg
    assert load_settings(config_path).engine.backend == "trt"
    assert store.client.get_run(ids["winner"]).data.tags["promoted"] == "true"
    assert "promoted" not in store.client.get_run(ids["tie_slower_p99"]).data.tags


def test_without_slo_the_fast_run_over_slo_wins(store: Store, config_path: Path) -> None:
    ids = _plant_main_sweep(store)
    assert _main(store, config_path) == 0
    prov = read_provenance(config_path.parent / "katago_serving.cfg")
    assert prov is not None and prov.run_id == ids["over_slo"]
    assert load_settings(config_path).engine.backend == "cuda"


def test_config_comments_survive(store: Store, config_path: Path) -> None:
    _plant_main_sweep(store)
    before = config_path.read_text()
    assert _main(store, config_path, "--slo-p99-ms", "1000") == 0
    after = config_path.read_text()
    old_lines = before.splitlines()
    # the two lines that tie config.yaml to the cfg written with it (kgserve.servedcfg) are added under backend:
    tie = [ln for ln in after.splitlines() if ln.strip().startswith(("cfg_run_id:", "cfg_sha256:"))]
    assert len(tie) == 2
    new_lines = [ln for ln in after.splitlines() if ln not in tie]
    assert len(old_lines) == len(new_lines)
    changed = [(a, b) for a, b in zip(old_lines, new_lines, strict=True) if a != b]
    assert len(changed) == 1
    old, new = changed[0]
    assert old.replace("backend: cuda", "backend: trt") == new
    comments = [ln.split("#", 1)[1] for ln in old_lines if "#" in ln]
    assert comments and comments == [ln.split("#", 1)[1] for ln in new_lines if "#" in ln]
    assert "promote` rewrites this line (comments are kept)" in after
    old_data, new_data = yaml.safe_load(before), yaml.safe_load(after)
    old_data["engine"]["backend"] = "trt"
    cfg_bytes = (config_path.parent / "katago_serving.cfg").read_bytes()
    old_data["engine"]["cfg_sha256"] = hashlib.sha256(cfg_bytes).hexdigest()
    old_data["engine"]["cfg_run_id"] = new_data["engine"]["cfg_run_id"]
    assert old_data == new_data


def test_previous_promotion_is_untagged_and_diff_shown(
    store: Store, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _plant_main_sweep(store)
    assert _main(store, config_path, "--slo-p99-ms", "1000") == 0
    cfg = config_path.parent / "katago_serving.cfg"
    first_inode = cfg.stat().st_ino
    store.sweep("s2")
    second = store.job(
        "s2",
        "better",
        backend="cuda",
        metrics={**OK, "req_per_s": 40, "p99_ms": 700},
        cfg="# better\nnnMaxBatchSize = 128\n",
    )
    capsys.readouterr()
    assert _main(store, config_path, "--diff") == 0  # default: the latest sweep
    out = capsys.readouterr().out
    assert "-nnMaxBatchSize = 64" in out and "+nnMaxBatchSize = 128" in out
    assert store.client.get_run(ids["winner"]).data.tags["promoted"] == "false"
    assert store.client.get_run(second).data.tags["promoted"] == "true"
    assert cfg.stat().st_ino != first_inode  # replaced by rename, not rewritten in place
    assert not [p for p in cfg.parent.iterdir() if p.name.endswith(".tmp")]
    assert load_settings(config_path).engine.backend == "cuda"


def test_simulated_refused_without_flag(store: Store, config_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Into a config that serves the simulated engine: only with --allow-simulated (the header says so)."""
    config_path.write_text(config_path.read_text().replace("  backend: cuda", "  backend: sim"))
    store.sweep("sim1")
    run_id = store.job(
        "sim1",
        "sim",
        backend="sim",
        metrics={**OK, "req_per_s": 9, "p99_ms": 100},
        tags={"simulated": "true", "katago_version": "1.17.2-sim", "model_file": "kgsim-b40c768.bin.gz"},
    )
    before = config_path.read_text()
    assert _main(store, config_path) == 1
    err = capsys.readouterr().err
    assert "--allow-simulated" in err
    assert not (config_path.parent / "katago_serving.cfg").exists()
    assert config_path.read_text() == before
    assert "promoted" not in store.client.get_run(run_id).data.tags

    assert _main(store, config_path, "--allow-simulated") == 0
    text = (config_path.parent / "katago_serving.cfg").read_text()
    assert text.startswith("# kgbench-promote: WARNING = SIMULATED ENGINE RESULTS")
    prov = read_provenance(config_path.parent / "katago_serving.cfg")
    assert prov is not None and prov.simulated and prov.backend == "sim"
    assert "SIMULATED" in capsys.readouterr().err


def test_dry_run_writes_nothing(store: Store, config_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = _plant_main_sweep(store)
    before = config_path.read_text()
    assert _main(store, config_path, "--dry-run", "--sweep", "s1") == 0
    assert "dry run" in capsys.readouterr().out
    assert config_path.read_text() == before
    assert not (config_path.parent / "katago_serving.cfg").exists()
    assert "promoted" not in store.client.get_run(ids["over_slo"]).data.tags


def test_explicit_run_still_obeys_rule(store: Store, config_path: Path) -> None:
    ids = _plant_main_sweep(store)
    assert _main(store, config_path, "--run", ids["fast_errors"]) == 1
    assert _main(store, config_path, "--run", ids["tie_slower_p99"]) == 0
    prov = read_provenance(config_path.parent / "katago_serving.cfg")
    assert prov is not None and prov.run_id == ids["tie_slower_p99"]


def test_unknown_sweep_and_missing_experiment(store: Store, config_path: Path) -> None:
    _plant_main_sweep(store)
    assert _main(store, config_path, "--sweep", "nope") == 1
    assert _main(store, config_path, "--sweep", "s1' or tags.x = 'y") == 1
    assert _main(store, config_path, "--experiment", "other") == 1


def test_failed_write_keeps_old_cfg(
    store: Store, config_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant_main_sweep(store)
    cfg = config_path.parent / "katago_serving.cfg"
    cfg.write_text("old = 1\n")

    def boom(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    assert _main(store, config_path) == 1
    assert "disk full" in capsys.readouterr().err
    assert cfg.read_text() == "old = 1\n"
    assert sorted(p.name for p in cfg.parent.iterdir()) == [".promote.lock", "config.yaml", "katago_serving.cfg"]


def test_failed_config_write_restores_cfg(
    store: Store, config_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant_main_sweep(store)
    cfg = config_path.parent / "katago_serving.cfg"
    cfg.write_text("old = 1\n")
    before = config_path.read_text()
    real_replace = os.replace

    def fail_for_config(src: str, dst: str) -> None:
        if Path(dst).name == "config.yaml":
            raise OSError("read-only file system")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", fail_for_config)
    assert _main(store, config_path, "--slo-p99-ms", "1000") == 1  # the trt run: config.yaml must change
    assert "restored" in capsys.readouterr().err
    assert cfg.read_text() == "old = 1\n"
    assert config_path.read_text() == before
    assert not [p for p in cfg.parent.iterdir() if p.name.endswith(".tmp")]


def test_engine_mode_sweep_is_not_promotable(
    store: Store, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store.sweep("eng")
    store.job("eng", "bench", backend="trt", metrics={"visits_per_s": 900.0}, tags={"mode": "engine"})
    assert _main(store, config_path) == 1
    err = capsys.readouterr().err
    assert "no run of sweep eng satisfies the rule" in err and "mode=engine" in err


def test_running_sweep_warns(store: Store, config_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _plant_main_sweep(store)
    store.client.update_run(store.sweeps["s1"], status="RUNNING")
    assert _main(store, config_path, "--dry-run") == 0
    assert "is still running" in capsys.readouterr().err


def test_a_synthetic_nets_winner_never_reaches_the_tracked_runtime(
    store: Store,
    config_path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sweep of a synthetic net (random weights) measures throughput only: promote passes it over unless told it is
    a throughput test, and then writes a scratch runtime with engine.throughput_test set, even with --config."""
    store.sweep("syn")
    winner = store.job("syn", "syn", metrics={**OK, "req_per_s": 18.5, "p99_ms": 900}, tags={"synthetic_net": "true"})
    config_before = config_path.read_text()
    assert _main(store, config_path) == 1
    captured = capsys.readouterr()
    assert "synthetic net" in captured.err and "--allow-synthetic" in captured.err
    scratch = tmp_path / "scratch-runtime"
    assert _main(store, config_path, "--allow-synthetic", "--runtime-dir", str(scratch)) == 0
    captured = capsys.readouterr()
    assert "SYNTHETIC NET" in captured.err
    assert config_path.read_text() == config_before and not (config_path.parent / "katago_serving.cfg").exists()
    written = load_settings(scratch / "config.yaml")
    assert written.engine.throughput_test is True
    prov = read_provenance(scratch / "katago_serving.cfg")
    assert prov is not None and prov.run_id == winner and prov.get("synthetic_net") == "true"
    # named --config without --runtime-dir: still a scratch runtime, never the named config in place
    from kgbench.decide import scratch as scratch_mod

    monkeypatch.setattr(scratch_mod, "DEFAULT_SCRATCH_DIR", tmp_path / "default-scratch")
    assert _main(store, config_path, "--allow-synthetic") == 0
    assert (tmp_path / "default-scratch" / "config.yaml").is_file()
    assert "never goes into a runtime config in place" in capsys.readouterr().out
    assert config_path.read_text() == config_before


def test_a_contended_run_is_set_aside_with_its_figures(
    store: Store, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store.sweep("busy")
    figures = "2 of 3 window(s) contended; worst level 8 window 2: other processes used 1.10 cores (>= 0.25)"
    busy = store.job(
        "busy",
        "busy",
        metrics={**OK, "req_per_s": 30, "p99_ms": 400},
        tags={"kgbench.contended": "true", "kgbench.contention": figures},
    )
    quiet = store.job("busy", "quiet", metrics={**OK, "req_per_s": 20, "p99_ms": 500})
    assert _main(store, config_path, "--dry-run") == 0
    out = capsys.readouterr().out
    assert f"set aside {busy} (-): contended ({figures})" in out
    assert f"would promote run {quiet[:8]}:" in out
