"""Several networks in one sweep (the `net` group): the report puts them side by side, each net's best run marked,
and promote chooses within one network and says why."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from kgbench.decide import promote as promote_mod
from kgbench.decide import report as report_mod
from kgbench.decide.nets import CHOICE_NOTE, net_bests, nets_frame
from kgbench.decide.runs import sweep_children
from kgbench.sweep.sweep_end import _best_lines

from .conftest import SERVED_MODEL, Store

OK = {"errors": 0, "timeouts": 0, "p50_ms": 300.0, "p99_ms": 900.0, "visits_per_s": 900.0}
B11 = {"net_name": "synthetic-b11c768h12nbt3tflrs-fson-silu", "net_arch": "b11c768nbt+attn",
       "net_gflops_per_eval": "57.29", "synthetic_net": "true",
       "model_file": "synthetic-b11c768h12nbt3tflrs-fson-silu.bin"}  # fmt: skip
# the pinned network itself (a trained file, the one runtime/config.yaml serves)
PINNED = {**B11, "net_name": "b11c768h12nbt3tflrs-fson-silu", "synthetic_net": "false", "model_file": SERVED_MODEL}
B40 = {"net_name": "synthetic-b40c768nbt", "net_arch": "b40c768nbt", "net_gflops_per_eval": "166.6",
       "synthetic_net": "true", "model_file": "synthetic-b40c768nbt.bin"}  # fmt: skip


def _plant(store: Store, b11: dict[str, str] = B11) -> dict[str, str]:
    """Two nets x two batch sizes, as `python -m kgbench -m net=synthetic-b11c768,synthetic-b40c768nbt
    nnMaxBatchSize=64,128` records them (or net=runtime for the pinned file): each net has its own best batch."""
    store.sweep("nets")
    ids = {}
    for net, tags, rates in (("b11", b11, (14.0, 15.5)), ("b40", B40, (21.5, 20.0))):
        for batch, rps in zip(("64", "128"), rates, strict=True):
            evals = rps * 100
            ids[f"{net}-{batch}"] = store.job(
                "nets", f"cuda b{batch} {net}", backend="cuda",
                metrics={**OK, "req_per_s": rps, "nn_evals_per_s": evals,
                         "mfu": evals * float(tags["net_gflops_per_eval"]) * 1e9 / 739e12},
                params={"katago.nnMaxBatchSize": batch}, tags=tags,
            )  # fmt: skip
    return ids


def test_the_report_puts_the_nets_side_by_side_each_with_its_best_run(store: Store, tmp_path: Path) -> None:
    ids = _plant(store)
    out = tmp_path / "report"
    assert report_mod.main(["--tracking-uri", store.uri, "--out", str(out), "--no-log"]) == 0
    nets = pd.read_csv(out / "nets.csv")
    assert list(nets["net"]) == [B40["net_name"], B11["net_name"]]  # the fastest net's first
    assert list(nets["req_per_s"]) == [21.5, 15.5] and list(nets["nn_evals_per_s"]) == [2150.0, 1550.0]
    assert list(nets["gflop_per_eval"]) == [166.6, 57.29] and nets["synthetic"].all()
    assert nets["mfu"].iloc[0] == pytest.approx(2150 * 166.6e9 / 739e12)
    runs = pd.read_csv(out / "runs.csv")
    assert {"net", "nn_evals_per_s", "mfu"} <= set(runs.columns)
    summary = (out / "summary.md").read_text()
    assert "## Networks" in summary and CHOICE_NOTE in summary
    assert "winner under the rule" not in summary  # the report's rule passes synthetic nets over
    parent = store.client.get_run(store.sweeps["nets"])
    bests = net_bests(sweep_children(store.client, parent))
    assert [nb.best.info.run_id for nb in bests if nb.best] == [ids["b40-64"], ids["b11-128"]]
    assert len(nets_frame(bests)) == 2


def test_the_report_marks_each_nets_winner(store: Store, tmp_path: Path) -> None:
    ids = _plant(store, PINNED)
    assert report_mod.main(["--tracking-uri", store.uri, "--out", str(tmp_path), "--no-log"]) == 0
    summary = (tmp_path / "summary.md").read_text()
    assert f"of net `{PINNED['net_name']}`: `{ids['b11-128']}`" in summary and f"--run {ids['b11-128']}" in summary
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert list(runs.loc[runs["verdict"] == "winner", "run"]) == [ids["b11-128"][:8]]


def test_the_sweeps_end_names_each_nets_best_and_how_to_promote_it(store: Store) -> None:
    ids = _plant(store)
    lines = _best_lines(sweep_children(store.client, store.client.get_run(store.sweeps["nets"])))
    assert lines[0] == f"2 networks side by side: {CHOICE_NOTE}"
    assert lines[1].startswith(f"{B40['net_name']}: best job is") and f"--run {ids['b40-64']}" in lines[2]
    assert lines[3].startswith(f"{B11['net_name']}: best job is") and f"--run {ids['b11-128']}" in lines[4]
    assert "--allow-synthetic" in lines[2]


def test_promote_chooses_within_one_network_and_says_so(
    store: Store, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _plant(store)
    args = ["--tracking-uri", store.uri, "--config", str(config_path), "--allow-synthetic", "--dry-run"]
    assert promote_mod.main(args) == 1
    err = capsys.readouterr().err
    assert "4 runtimes" not in err and "2 runtimes" in err and CHOICE_NOTE in err and "--run ID" in err
    assert promote_mod.main([*args, "--run", ids["b11-128"]]) == 0  # one net's best, named
    assert ids["b11-128"][:8] in capsys.readouterr().out


def test_promote_in_place_takes_the_served_nets_runs_and_says_why_the_others_are_left(
    store: Store, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _plant(store, PINNED)
    assert promote_mod.main(["--tracking-uri", store.uri, "--config", str(config_path), "--dry-run"]) == 0
    out = capsys.readouterr()
    assert ids["b11-128"][:8] in out.out + out.err
    assert "left out 2 runs of another runtime" in out.out + out.err and CHOICE_NOTE in out.out + out.err
