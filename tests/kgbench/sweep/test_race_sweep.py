"""The race at the end of a real sim sweep: two configs that tie are re-measured interleaved, each replicate a job
of its own, folded into their runs by promote. Behaviour only (which jobs ran in which order, what was tagged)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgbench.decide import promote
from tests.helpers.kgbench_runs import client_for, run_kgbench, runs_by_role

pytestmark = pytest.mark.slow

# a fixed capacity of 60 req/s (the knob counts simulated seconds, so at speed 1 it is wall-clock req/s): both
# configs serve alike, so their intervals overlap and they tie; each query takes ~4/60 s at concurrency 4, far above
# the load generator's own overhead, so the 0.5-s windows agree and no job is flagged unstable on a busy machine
SIM = {"KGSERVE_SIM_SPEED": "1", "KGSERVE_SIM_FIXED_RPS": "60"}


def test_tied_runs_are_raced_interleaved_and_promote_names_the_indistinguishable_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run_kgbench(
        tmp_path, "-m", "backend=sim", "nnMaxBatchSize=64,65", "load=smoke", "load.concurrency=[4]",
        "race.enabled=true", "race.max_rounds=2", env=SIM,
    )  # fmt: skip
    assert code == 0, out
    client = client_for(tmp_path)
    jobs = sorted(runs_by_role(client, "job"), key=lambda r: r.info.start_time)
    grid = [r for r in jobs if "kgbench.race_of" not in r.data.tags]
    replicates = [r for r in jobs if "kgbench.race_of" in r.data.tags]
    assert len(grid) == 2 and len(replicates) == 4, out
    order = [(r.data.tags["kgbench.race_round"], r.data.tags["kgbench.race_of"]) for r in replicates]
    leader, other = order[0][1], order[1][1]
    assert order == [("1", leader), ("1", other), ("2", leader), ("2", other)]  # A, B, A, B
    assert {leader, other} == {r.info.run_id for r in grid}
    for rep in replicates:  # the same config as the run it re-measures, as launched
        raced = next(r for r in grid if r.info.run_id == rep.data.tags["kgbench.race_of"])
        assert rep.data.params["katago.nnMaxBatchSize"] == raced.data.params["katago.nnMaxBatchSize"]
        assert rep.data.tags["hydra_overrides"] == raced.data.tags["hydra_overrides"]
    (parent,) = runs_by_role(client, "sweep")
    assert parent.data.tags["kgbench.race"].startswith("raced 2 contenders")
    assert "race round 1 of at most 2" in out and "race round 2" in out

    # the runs' own runtime (the repository's runtime config, simulated: a scratch runtime), written nowhere
    argv = ["--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--allow-simulated", "--dry-run", "--explain"]
    capsys.readouterr()
    assert promote.main(argv) == 0
    shown = capsys.readouterr().out
    assert "(2 replicates)" in shown  # the intervals come from the replicates
    assert "race replicates" in shown  # the decision says on what evidence
