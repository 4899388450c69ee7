"""`python -m kgbench`'s light paths import only what they use: Hydra's own answers (`--help`, `--cfg job`), a single
run or a sweep (`-m`) the preflight refuses, and a sweep Hydra refuses never load MLflow, Optuna or matplotlib (~2 s of
a bare Hydra app's ~0.2 s; figures in docs/performance.md). Behaviour, not time: the modules a real subprocess
imported, as `python -X importtime` lists them, and `--space` (a search's path, which does load Optuna) shows the
listing would catch one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = {"mlflow", "optuna", "matplotlib"}
_IMPORTED = re.compile(r"^import time:\s*\d+\s*\|\s*\d+\s*\|\s*(\S+)\s*$")


def _kgbench(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """`python -X importtime -m kgbench ARGS` in `tmp_path` (Hydra's outputs/ there); the top-level packages it
    imported."""
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "kgbench", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    names = {match.group(1).split(".")[0] for line in done.stderr.splitlines() if (match := _IMPORTED.match(line))}
    return done, names


@pytest.mark.parametrize(
    ("args", "status", "says"),
    [
        (["--help"], 0, "Powered by Hydra"),
        (["--cfg", "job"], 0, "nnMaxBatchSize"),
        # the preflight refuses a single run whose engine binary is missing, before anything is recorded
        (["backend=cuda", "engine.binary=/nonexistent/katago"], 2, "nothing to run"),
        # a sweep on the sim none of whose jobs can start (its model is missing): refused before MLflow is imported
        (["-m", "backend=sim", "engine.model=/nonexistent/net.bin.gz", "nnMaxBatchSize=8,16"], 2,
         "backend=sim (2 jobs):\n    the model file /nonexistent/net.bin.gz does not exist"),
        # a sweep with an option no group has: Hydra's error as the grid sweeper composes its jobs
        (["-m", "backend=sim,nosuch"], 1, "Could not find 'backend/nosuch'"),
    ],
    ids=["help", "cfg-job", "refused-run", "refused-sweep", "bad-override-sweep"],
)  # fmt: skip
def test_a_light_path_imports_no_mlflow_optuna_or_matplotlib(
    tmp_path: Path, args: list[str], status: int, says: str
) -> None:
    done, imported = _kgbench(tmp_path, *args)
    assert done.returncode == status, done.stdout[-2000:] + done.stderr[-2000:]
    assert says in done.stdout + done.stderr
    assert "hydra" in imported and "kgbench" in imported  # the listing is read
    assert imported & HEAVY == set()
    assert not (tmp_path / "mlflow.db").exists()  # nothing recorded


def test_the_listing_sees_a_heavy_import_where_one_is_used(tmp_path: Path) -> None:
    done, imported = _kgbench(tmp_path, "--space", "-m", "hparams_search=optuna", "backend=sim")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "optuna" in imported
