"""The eigen pipeline end to end on the real KataGo, as a user with a CPU build runs it (docs/real-katago.md):
a two-job `python -m kgbench -m backend=eigen` sweep with the CPU load profile -> `python -m kgbench.promote`
(no --allow-simulated: these are real measurements) -> `python -m kgserve` answers a sample ->
`runtime/serve_analysis.sh` starts kgserve itself, analyses a sample and stops it.

Everything it writes lives in tmp_path: a copy of runtime/config.yaml pointed at the two files, its own
serving cfg, MLflow store and Hydra output; the checkout's tracked files stay as they were (checked).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient
from ruamel.yaml import YAML

from kgserve.provenance import read_provenance
from kgserve.settings import load_settings
from tests.conftest import REPO, kgserve_ready
from tests.helpers.kgbench_runs import run_ok, runtime_config_copy
from tests.katago.conftest import RealKatago

pytestmark = [pytest.mark.katago, pytest.mark.slow]

PY = sys.executable
SAMPLE = "tsumego_straight3_9x9"
# the sweep: two batch sizes, CPU-sized threads, cache and load (conf/threads/cpu.yaml, conf/load/cpu.yaml)
# race.enabled=false: two batch sizes the Eigen backend serves alike would be raced (load=cpu races by default);
# the race is tested on the sim (tests/kgbench/sweep/test_race_sweep.py), this test is the pipeline
SWEEP = [
    "backend=eigen",
    "threads=cpu",
    "load=cpu",
    "nnMaxBatchSize=4,8",
    "nnCacheSizePowerOfTwo=18",
    "race.enabled=false",
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _eigen_config(tmp_path: Path, katago: RealKatago) -> Path:
    """The end-to-end test's commented runtime/config.yaml copy (tests/kgbench/decide), made a CPU runtime the way a
    user does it (docs/real-katago.md: engine.backend eigen, its command and model the real files) with a fixed free
    port (serve_analysis.sh reads it from the file)."""
    path = runtime_config_copy(tmp_path)
    yaml = YAML()
    data: Any = yaml.load(path.read_text())
    data["server"]["port"] = _free_port()
    data["engine"]["backend"] = "eigen"  # the runtime promote writes: a GPU config would refuse a CPU sweep
    data["engine"]["backends"]["eigen"]["command"] = [str(katago.binary)]
    data["engine"]["backends"]["eigen"]["model"] = str(katago.model)
    data["engine"]["backends"]["eigen"]["startup_timeout_s"] = 60
    with path.open("w") as handle:
        yaml.dump(data, handle)
    (path.parent / "katago_serving.cfg").write_text((REPO / "runtime" / "katago_serving.cfg").read_text())
    return path


def _tracked_state() -> str:
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True, text=True, check=False
    )
    diff = subprocess.run(["git", "diff"], cwd=REPO, capture_output=True, text=True, check=False)
    return status.stdout + diff.stdout


# two minutes on busy shared cores (docs/real-katago.md); its own steps may take 400 + 300 + 120 + 240 s, far past
# the suite's 300 s per test
@pytest.mark.timeout(900)
def test_eigen_sweep_promote_serve(tmp_path: Path, real_katago: RealKatago) -> None:
    tracked_before = _tracked_state()
    config = _eigen_config(tmp_path, real_katago)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}

    sweep = run_ok(
        [PY, "-m", "kgbench", "-m", *SWEEP, f"runtime_config={config}", "mlflow.experiment=eigen",
         f"hydra.sweep.dir={tmp_path / 'multirun'}"],
        env, tmp_path, timeout=400,
    )  # fmt: skip
    assert "kgbench sweep: 2 job(s), sorted by req/s" in sweep.stdout + sweep.stderr
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("eigen")
    assert experiment is not None
    jobs = client.search_runs([experiment.experiment_id], "tags.`kgbench.role` = 'job'")
    assert len(jobs) == 2
    for run in jobs:
        data = run.data
        assert run.info.status == "FINISHED", data.tags.get("kgbench.failure_reason")
        assert data.tags["backend"] == "eigen" and data.tags["simulated"] == "false"
        assert data.tags["model_file"] == real_katago.model.name and "sim" not in data.tags["katago_version"]
        assert data.metrics["req_per_s"] > 0 and data.metrics["errors"] == 0
        assert data.metrics["nn_rows"] > 0 and data.metrics["engine_start_s"] > 0
        assert data.params["katago.numAnalysisThreads"] == "4" and data.params["load.window_s"] == "5.0"
    stable = [
        r for r in jobs if r.data.tags["kgbench.unstable"] == "false" and r.data.tags["kgbench.invalid"] == "false"
    ]
    assert stable, [(r.data.tags["kgbench.unstable"], r.data.tags.get("kgbench.invalid_reason")) for r in jobs]

    promoted = run_ok(
        [PY, "-m", "kgbench.promote", "--experiment", "eigen", "--config", str(config)], env, tmp_path, timeout=300
    )
    assert promoted.stdout.startswith("promoted run ") and " eigen nnMaxBatchSize=" in promoted.stdout
    (winner,) = client.search_runs([experiment.experiment_id], "tags.promoted = 'true'")
    provenance = read_provenance(config.parent / "katago_serving.cfg")
    assert provenance is not None and provenance.run_id == winner.info.run_id
    assert not provenance.simulated and not provenance.modified
    assert "backend: eigen" in config.read_text() and "# Which backend to serve." in config.read_text()

    sample = json.loads((REPO / "assets" / "analysis" / "inputs" / f"{SAMPLE}.json").read_text())
    with kgserve_ready(config, env, cwd=tmp_path) as (process, ready):
        base = str(process.url)
        assert ready["backend"] == "eigen" and ready["simulated"] is False
        assert ready["provenance"]["run_id"] == winner.info.run_id and ready["provenance"]["modified"] is False
        request = urllib.request.Request(base + "/analysis", data=json.dumps(sample).encode())
        with urllib.request.urlopen(request, timeout=120) as response:
            assert response.status == 200
            (line,) = [json.loads(raw) for raw in response.read().splitlines()]
        assert line["id"] == SAMPLE and line["rootInfo"]["visits"] == sample["maxVisits"]

    out = tmp_path / "out.jsonl"
    script = subprocess.run(
        [str(REPO / "runtime" / "serve_analysis.sh"), "--config", str(config), "-o", str(out), SAMPLE],
        env={**env, "KG_PYTHON": PY, "TERM": "dumb"}, cwd=REPO, capture_output=True, text=True, timeout=240,
        start_new_session=True, check=False,
    )  # fmt: skip
    assert script.returncode == 0, script.stdout + script.stderr
    assert "starting kgserve (backend eigen" in script.stdout + script.stderr, script.stderr
    (line,) = [json.loads(raw) for raw in out.read_text().splitlines()]
    assert line["id"] == SAMPLE and line["isDuringSearch"] is False and line["moveInfos"]
    port = load_settings(config).server.port
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()  # the kgserve it started is gone

    assert _tracked_state() == tracked_before, "the pipeline changed tracked files of the checkout"
