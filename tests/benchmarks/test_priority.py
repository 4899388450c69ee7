"""The priority-class benchmark: its table, its engine choice, and a short real run on the sim."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from benchmarks.priority import ModeResult, Plan, engine_settings, run, table


def result(classes: bool, p99: float, batch: float) -> ModeResult:
    return ModeResult(classes, 100.0, 120.0, 150.0, p99, 10, batch, 50, 1.5)


def test_table_states_the_targets_ratios() -> None:
    text = table("sim", Plan(), [result(False, 600.0, 4.0), result(True, 180.0, 3.9)])
    off, on = text.splitlines()[-2:]
    assert off.startswith("| off |") and "| 5.00x |" in off and "| 100% |" in off
    assert on.startswith("| on |") and "| 1.50x |" in on and "| 98% | 1.5 |" in on


def test_the_katago_engine_needs_both_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KGBENCH_KATAGO_BIN", raising=False)
    monkeypatch.setenv("KGBENCH_KATAGO_MODEL", "/nowhere/model.bin.gz")
    with pytest.raises(SystemExit, match="KGBENCH_KATAGO_BIN"):
        engine_settings("katago", tmp_path / "x.cfg", True)
    monkeypatch.setenv("KGBENCH_KATAGO_BIN", "/nowhere/katago")
    settings, _ = engine_settings("katago", tmp_path / "x.cfg", False)
    assert settings.engine.backend == "eigen" and settings.engine.argv_prefix() == ["/nowhere/katago"]
    assert settings.engine.cfg == tmp_path / "x.cfg" and settings.priority.classes is False


@pytest.mark.slow
def test_a_short_run_on_the_sim_measures_both_modes() -> None:
    plan = Plan(idle_queries=3, warmup_s=0.5, measure_s=3.0, batch_clients=4, interactive_per_s=2.0)
    results = run("sim", plan)
    assert [r.classes for r in results] == [False, True]
    for r in results:
        assert r.interactive_samples == 6 and r.batch_finished > 0
        assert all(math.isfinite(value) and value > 0 for value in (r.idle_p99_ms, r.loaded_p99_ms, r.batch_per_s))
