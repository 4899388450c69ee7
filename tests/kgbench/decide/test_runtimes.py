"""Promote chooses only among the runs of the runtime it writes: never a CPU or simulated sweep into the GPU runtime,
never figures of another model, another runtime config or another machine (kgbench.decide.runtimes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kgserve.settings
from kgbench.decide import promote as promote_mod
from kgbench.decide import scratch
from kgserve.provenance import read_provenance
from kgserve.settings import load_settings
from tests.conftest import REPO
from tests.helpers.clone import clone_working_tree, git_status
from tests.helpers.kgbench_runs import STUB_KATAGO

from .conftest import SERVED_MODEL, Store

OK = {"errors": 0, "timeouts": 0, "p50_ms": 300.0, "p99_ms": 500.0}
CPU_NET = "g170-b6c96-s175395328-d26788732.bin.gz"


def _cpu_tags(config: Path, tmp_path: Path) -> dict[str, str]:
    """An eigen job as `python -m kgbench backend=eigen engine.binary=... engine.model=...` tags it (its KataGo a
    stand-in that answers `version`: promote checks the KataGo it writes into a runtime)."""
    katago = tmp_path / "katago-cpu" / "katago"
    if not katago.exists():
        katago.parent.mkdir(parents=True)
        katago.write_text(STUB_KATAGO)
        katago.chmod(0o755)
    return {
        "kgbench.runtime_config": str(config.resolve()),
        "model_file": CPU_NET,
        "host": "laptop",
        "gpu_name": "none",
        "kgbench.engine_binary": str(tmp_path / "katago-cpu" / "katago"),
        "kgbench.engine_model": str(tmp_path / "katago-cpu" / CPU_NET),
    }


@pytest.fixture
def tracked(config_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The runtime config a plain promote edits is a copy in tmp_path (its cfg as shipped)."""
    monkeypatch.setattr(kgserve.settings, "DEFAULT_CONFIG_PATH", config_path)
    monkeypatch.setattr(scratch, "DEFAULT_SCRATCH_DIR", tmp_path / "runtime" / "scratch")
    (config_path.parent / "katago_serving.cfg").write_text((REPO / "runtime" / "katago_serving.cfg").read_text())
    return config_path


def _files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}


def test_a_cpu_sweep_is_refused_by_the_gpu_runtime_naming_both(
    store: Store, tracked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store.sweep("cpu")
    run = store.job(
        "cpu", "eigen b8", backend="eigen", metrics={**OK, "req_per_s": 4.1}, tags=_cpu_tags(tracked, tmp_path)
    )
    before = _files(tracked.parent)
    assert promote_mod.main(["--tracking-uri", store.uri]) == 1
    err = capsys.readouterr().err
    assert "promote will not cross runtimes" in err
    assert f"serves cuda (GPU) with {SERVED_MODEL}" in err  # the runtime it would write
    assert f"eigen (CPU) with {CPU_NET} on laptop" in err  # the runs'
    assert "Nothing written" in err and "--runtime-dir runtime/eigen" in err
    assert _files(tracked.parent) == before
    assert "promoted" not in store.client.get_run(run).data.tags


def test_a_cpu_sweep_goes_into_a_runtime_of_its_own(
    store: Store, tracked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store.sweep("cpu")
    tags = _cpu_tags(tracked, tmp_path)
    slow = store.job("cpu", "eigen b4", backend="eigen", metrics={**OK, "req_per_s": 2.0}, tags=tags)
    fast = store.job("cpu", "eigen b8", backend="eigen", metrics={**OK, "req_per_s": 4.1}, tags=tags)
    before = _files(tracked.parent)
    own = tmp_path / "runtime" / "eigen"
    assert promote_mod.main(["--tracking-uri", store.uri, "--runtime-dir", str(own)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2, out  # what it did, in one line; where it wrote and how to serve it
    assert out[0].startswith(f"promoted run {fast[:8]}: eigen 4.1 req/s, p99 500 ms, over {slow[:8]} (eigen")
    assert out[0].endswith("for the highest req/s beyond the noise")
    assert f"serve it with: python -m kgserve --config {own / 'config.yaml'}" in out[1]
    assert _files(tracked.parent) == before
    served = load_settings(own / "config.yaml")
    assert served.engine.backend == "eigen"
    assert served.engine.argv_prefix("eigen") == [tags["kgbench.engine_binary"]]  # the KataGo the sweep ran
    assert served.engine.model_for("eigen") == Path(tags["kgbench.engine_model"])
    provenance = read_provenance(own / "katago_serving.cfg")
    assert provenance is not None and provenance.run_id == fast


def test_runs_of_other_runtimes_in_the_sweep_are_left_out_and_said_so(
    store: Store, tracked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store.sweep("mixed")
    gpu = store.job("mixed", "cuda b64", backend="cuda", metrics={**OK, "req_per_s": 20.0})
    store.job(
        "mixed", "eigen b8", backend="eigen", metrics={**OK, "req_per_s": 40.0}, tags=_cpu_tags(tracked, tmp_path)
    )
    assert promote_mod.main(["--tracking-uri", store.uri]) == 0
    out = capsys.readouterr().out
    assert "left out 1 run of another runtime: 1 eigen (CPU)" in out
    assert f"promoted run {gpu[:8]}: cuda" in out
    assert read_provenance(tracked.parent / "katago_serving.cfg").run_id == gpu  # type: ignore[union-attr]


def test_another_model_or_runtime_config_is_another_runtime(
    store: Store, tracked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store.sweep("net")
    store.job(
        "net", "katrain", backend="cuda", metrics={**OK, "req_per_s": 20.0}, tags={"model_file": "kata1-b18.bin.gz"}
    )
    assert promote_mod.main(["--tracking-uri", store.uri]) == 1
    assert f"ran the model kata1-b18.bin.gz, not {SERVED_MODEL}" in capsys.readouterr().err
    store.sweep("elsewhere")
    other = str(tmp_path / "other" / "config.yaml")
    store.job(
        "elsewhere", "cuda", backend="cuda", metrics={**OK, "req_per_s": 20.0}, tags={"kgbench.runtime_config": other}
    )
    assert promote_mod.main(["--tracking-uri", store.uri]) == 1
    assert "composed from another runtime config" in capsys.readouterr().err


def test_runs_of_one_machine_are_compared(
    store: Store, tracked: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sweep over two kinds of GPU: promote on one of them compares its own runs; elsewhere it asks for --run."""
    store.sweep("nodes")
    h100 = store.job("nodes", "a", backend="cuda", metrics={**OK, "req_per_s": 30.0}, tags={"gpu_name": "NVIDIA H100"})
    h200 = store.job("nodes", "b", backend="cuda", metrics={**OK, "req_per_s": 20.0}, tags={"gpu_name": "NVIDIA H200"})
    monkeypatch.setattr(promote_mod, "this_machine", lambda: "NVIDIA H200")
    assert promote_mod.main(["--tracking-uri", store.uri, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"would promote run {h200[:8]}" in out and "left out 1 run of another runtime" in out
    monkeypatch.setattr(promote_mod, "this_machine", lambda: "login1")
    assert promote_mod.main(["--tracking-uri", store.uri, "--dry-run"]) == 1
    err = capsys.readouterr().err
    assert "NVIDIA H100" in err and "NVIDIA H200" in err and "--run ID" in err
    assert promote_mod.main(["--tracking-uri", store.uri, "--dry-run", "--run", h100]) == 0


@pytest.mark.slow
def test_a_plain_promote_after_a_cpu_sweep_leaves_a_fresh_clone_untouched(store: Store, tmp_path: Path) -> None:
    """The user's own checkout: `python -m kgbench.promote` as typed, in a fresh clone, after a CPU sweep of its
    runtime config: refused with both runtimes named, every tracked file as it was."""
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    clone = clone_working_tree(tmp_path / "clone")
    store.sweep("cpu")
    store.job("cpu", "eigen b8", backend="eigen", metrics={**OK, "req_per_s": 4.1},
              tags=_cpu_tags(clone / "runtime" / "config.yaml", tmp_path))  # fmt: skip
    env = {**os.environ, "MLFLOW_TRACKING_URI": store.uri, "PYTHONPATH": str(clone)}
    done = subprocess.run(
        [sys.executable, "-m", "kgbench.promote"], cwd=clone, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "promote will not cross runtimes: runtime/config.yaml serves cuda (GPU)" in done.stderr
    assert "eigen (CPU)" in done.stderr and "Nothing written" in done.stderr
    assert git_status(clone) == ""
