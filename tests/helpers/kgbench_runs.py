"""kgbench as a user runs it, from the tests: `python -m kgbench` in a subprocess with its own MLflow store, the
runs it recorded, a runtime config of its own, and any command that must succeed (tests/kgbench on the sim,
tests/katago on a real KataGo)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import optuna
from hydra import compose, initialize_config_dir
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig
from ruamel.yaml import YAML

from kgbench.__main__ import CONF_DIR, rewrite_overrides
from kgbench.search.attrs import FAMILY_ATTR
from kgbench.search.journal import open_storage
from tests.conftest import REPO
from tests.helpers.mlflow_store import seeded_uri

# issue 28's 3 x 3 real-CPU space as an Optuna search (the search's own two keys left out), for `--space` and search
# tests; benchmarks.contention's SEARCH narrows it the same way
CPU_SEARCH = [
    "--space", "-m", "backend=eigen", "threads=cpu", "load=cpu", "hparams_search=optuna",
    "~hydra.sweeper.params.nnMaxBatchSize", "~hydra.sweeper.params.numNNServerThreadsPerModel",
    "hydra.sweeper.params.numAnalysisThreads='tag(ordered, choice(1, 2, 4))'",
    "numSearchThreadsPerAnalysisThread=tag(ordered, choice(1, 2, 4))",
]  # fmt: skip


def composed(*overrides: str) -> DictConfig:
    """One job's config as `python -m kgbench OVERRIDES` composes it (plain keys get `++`)."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=rewrite_overrides(list(overrides)))


def run_kgbench(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 600, seed_store: bool = True
) -> tuple[int, str]:
    """`python -m kgbench ARGS` with the MLflow store tmp_path/mlflow.db (an empty one copied in first unless
    `seed_store=False`: a test that checks kgbench makes no store), exit status and output."""
    db = tmp_path / "mlflow.db"
    full_env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": seeded_uri(db) if seed_store else f"sqlite:///{db}",
        "KGSERVE_SIM_DEVICE": f"kgbench-test-{os.getpid()}-{tmp_path.name}",
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    hydra_dirs = [f"hydra.sweep.dir={tmp_path / 'multirun'}", f"hydra.run.dir={tmp_path / 'run'}"]
    proc = subprocess.run(
        [sys.executable, "-m", "kgbench", *args, *hydra_dirs],
        cwd=tmp_path,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return proc.returncode, proc.stdout + proc.stderr


def search_studies(journal: Path, family: str) -> list[str]:
    """The studies of ``hydra.sweeper.study_name=family`` in a search's journal, oldest first (a study is
    <family>-<digest of its condition and space>: kgbench.search.studies)."""
    summaries = optuna.get_all_study_summaries(open_storage(journal), include_best_trial=False)
    return [s.study_name for s in summaries if s.user_attrs.get(FAMILY_ATTR) == family]


def study_named(journal: Path, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=open_storage(journal))


def search_study(journal: Path, family: str) -> optuna.Study:
    """The one study of ``family`` in the journal."""
    (name,) = search_studies(journal, family)
    return study_named(journal, name)


def client_for(tmp_path: Path) -> MlflowClient:
    return MlflowClient(tracking_uri=seeded_uri(tmp_path / "mlflow.db"))


def runs_by_role(client: MlflowClient, role: str) -> list:
    """The runs of `role` in kgbench's experiments (kgbench, kgbench-sim: a simulated sweep's)."""
    experiments = [e.experiment_id for e in client.search_experiments() if e.name in ("kgbench", "kgbench-sim")]
    assert experiments, [e.name for e in client.search_experiments()]
    return client.search_runs(experiments, f"tags.`kgbench.role` = '{role}'", max_results=100)


def runtime_config_copy(tmp_path: Path) -> Path:
    """runtime/config.yaml with its comments, the sim model made absolute, a free port, files in tmp_path."""
    yaml = YAML()  # round-trip: comments kept, so promote's edit is exercised on a commented file
    data: Any = yaml.load((REPO / "runtime" / "config.yaml").read_text())
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    data["server"]["port"] = 0
    engine = data["engine"]
    assert engine["backend"] != "sim"  # promote must switch it
    engine["cfg"] = str(runtime / "katago_serving.cfg")
    engine["home_data_dir"] = str(tmp_path / "katago_home")
    sim_model = REPO / "assets" / "sim" / Path(str(engine["backends"]["sim"]["model"])).name
    assert sim_model.exists()
    engine["backends"]["sim"]["model"] = str(sim_model)
    path = runtime / "config.yaml"
    with path.open("w") as handle:
        yaml.dump(data, handle)
    return path


def run_ok(argv: list[str], env: dict[str, str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


# A KataGo stand-in that passes the preflight (`version` answers) and fails at once as an engine: a job that uses it
# is recorded, and fails at its engine's start (kgserve gives up after two restarts), in seconds.
STUB_KATAGO = """#!/bin/sh
if [ "$1" = version ]; then echo "KataGo v1.17.2 (stub)"; exit 0; fi
echo "stub katago: no GPU here" >&2
exit 1
"""


def stub_engine_config(tmp_path: Path, *backends: str, script: str = STUB_KATAGO) -> Path:
    """runtime_config_copy with `backends` (e.g. cuda, trt) pointed at `script` and the sim's model file."""
    path = runtime_config_copy(tmp_path)
    stub = tmp_path / "stub-katago"
    stub.write_text(script)
    stub.chmod(0o755)
    yaml = YAML()
    data: Any = yaml.load(path.read_text())
    # a stand-in fails every start, and a job gives up at its second restart: the runtime's backoff (0.5 s, then
    # 1 s) would only be waited out, job after job
    data["engine"]["restart_backoff_initial_s"] = 0.05
    for backend in backends:
        data["engine"]["backends"][backend]["command"] = [str(stub)]
        data["engine"]["backends"][backend]["model"] = data["engine"]["backends"]["sim"]["model"]
        data["engine"]["backends"][backend]["startup_timeout_s"] = 30
    with path.open("w") as handle:
        yaml.dump(data, handle)
    return path
