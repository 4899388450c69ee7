"""The node's users' own `katago benchmark` grid beside a sweep's served best (kgbench.decide.baseline): the public
H200 record's best point, for the same net and card only, labelled simulated on the sim, in the sweep's report."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgbench.decide import report as report_mod
from kgbench.decide.baseline import PUBLIC_GRIDS, baseline_for, compare

from .conftest import Store

GRID = PUBLIC_GRIDS[0]


def test_the_public_grid_applies_to_its_net_on_its_card_only() -> None:
    assert GRID.visits_per_s == 5138 and GRID.threads == 384 and GRID.node == "hopper-34"
    assert baseline_for("b28c512nbt", "NVIDIA H200", simulated=False) is GRID
    assert baseline_for("synthetic-b28c512nbt", "none", simulated=True) is GRID  # the sim's b28 profile is the H200's
    assert baseline_for("b28c512nbt", "NVIDIA H100 80GB HBM3", simulated=False) is None
    assert baseline_for("b11c768nbt+attn", "NVIDIA H200", simulated=False) is None
    assert baseline_for(None, "NVIDIA H200", simulated=False) is None


def test_the_comparison_meets_in_visits_and_in_queries_of_the_jobs_size() -> None:
    found = compare("b28c512nbt", "NVIDIA H200", {"req_per_s": 8.0, "visits_per_s": 8000.0}, simulated=False)
    assert found is not None
    assert found.visits_per_query == 1000 and found.baseline_req_per_s == pytest.approx(5.138)
    assert found.gain == pytest.approx(8000 / 5138 - 1)
    assert "beats it by 56%" in found.line() and "SIMULATED" not in found.line()
    slower = compare("b28c512nbt", "NVIDIA H200", {"req_per_s": 4.0, "visits_per_s": 4000.0}, simulated=True)
    assert slower is not None and "falls short of it by 22%" in slower.line()
    assert slower.line().startswith("SIMULATED")
    assert compare("b28c512nbt", "NVIDIA H200", {"req_per_s": 4.0}, simulated=False) is None  # no visits/s


def test_the_sweep_report_puts_the_winner_beside_the_users_grid(store: Store, tmp_path: Path) -> None:
    store.sweep("b28")
    store.job(
        "b28", "job0", metrics={"req_per_s": 6.0, "visits_per_s": 6000.0, "errors": 0, "p99_ms": 900.0},
        tags={"net_arch": "b28c512nbt", "net_name": "synthetic-b28c512nbt", "gpu_name": "none", "simulated": "true"},
    )  # fmt: skip
    out = tmp_path / "report"
    assert report_mod.main(["--tracking-uri", store.uri, "--sweep", "b28", "--out", str(out)]) == 0
    summary = (out / "summary.md").read_text()
    assert "against the users' own grid: SIMULATED" in summary
    assert "5,138 visits/s" in summary and "beats it by 17%" in summary
    store.sweep("other")
    store.job("other", "job0", metrics={"req_per_s": 6.0, "visits_per_s": 6000.0, "errors": 0, "p99_ms": 900.0})
    out = tmp_path / "other"
    assert report_mod.main(["--tracking-uri", store.uri, "--sweep", "other", "--out", str(out)]) == 0
    assert "users' own grid" not in (out / "summary.md").read_text()
