"""The cpu-eigen-b6c96 profile: what KataGo's Eigen backend does on a small CPU, and how the profile is chosen."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from kgserve.sim.model.profiles import DEFAULT_PROFILE, PROFILES, get_profile, profile_for_model
from kgserve.sim.model.throughput import SimParams, predict_throughput, steady_state
from kgserve.sim.model.throughput_cpu import nn_threads
from kgserve.sim.startup import Knobs
from tests.conftest import REPO
from tests.kgserve.sim.conftest import sim_argv, sim_env, write_cfg

CPU = "cpu-eigen-b6c96"
VISITS = 32


def rps(profile: str = CPU, concurrency: int | None = None, **cfg: Any) -> float:
    values = {
        "numAnalysisThreads": 8,
        "numSearchThreadsPerAnalysisThread": 1,
        "nnMaxBatchSize": 16,
        "numNNServerThreadsPerModel": 1,
        **cfg,
    }
    return predict_throughput(values, VISITS, concurrency or int(values["numAnalysisThreads"]), profile=profile)


def test_server_threads_are_ignored_as_by_the_eigen_backend() -> None:
    # KataGo's Eigen backend marks numNNServerThreadsPerModel used and runs numEigenThreadsPerModel NN threads
    for threads in (1, 2, 8):
        assert rps(numNNServerThreadsPerModel=threads) == rps()
    assert rps(DEFAULT_PROFILE, numNNServerThreadsPerModel=2) != rps(DEFAULT_PROFILE)  # the GPU model differs


def test_one_search_thread_keeps_one_core_busy() -> None:
    one = rps(numAnalysisThreads=1, nnMaxBatchSize=1)
    two = rps(numAnalysisThreads=2, nnMaxBatchSize=2)
    assert 1.6 * one < two < 2.4 * one  # two search threads use both cores


def test_search_threads_per_position_waste_evaluations() -> None:
    spread = rps(numAnalysisThreads=16, nnMaxBatchSize=16)
    rates = [rps(numAnalysisThreads=16 // t, numSearchThreadsPerAnalysisThread=t) for t in (1, 2, 4, 8, 16)]
    assert rates[0] == pytest.approx(spread)
    assert rates == sorted(rates, reverse=True) and rates[-1] < 0.9 * rates[0]  # the real engine: 0.85


def test_eigen_threads_default_and_override() -> None:
    dev = get_profile(CPU)
    assert [nn_threads(dev, n, 0) for n in (1, 2, 64)] == [1, 2, dev.host_cores]
    assert nn_threads(dev, 64, 1) == 1
    assert rps(numEigenThreadsPerModel=1) < 0.8 * rps()  # the NN on one core is the bottleneck
    assert rps(numEigenThreadsPerModel=2) == rps()


def test_batches_amortise_and_threads_beyond_the_cores_cost() -> None:
    assert rps(numAnalysisThreads=16, nnMaxBatchSize=1) < rps(numAnalysisThreads=16, nnMaxBatchSize=16)
    assert rps(numAnalysisThreads=512, nnMaxBatchSize=512) < rps(numAnalysisThreads=16, nnMaxBatchSize=16)
    # with both cores busy an NN thread finds at most batch_cap rows queued (the real engine: <= 2.0 on 2 cores)
    batches = [
        steady_state(SimParams(analysis_threads=n, max_batch=b, profile=CPU), n, VISITS).batch
        for n, b in ((1, 8), (16, 1), (16, 4), (64, 64))
    ]
    assert batches == pytest.approx([1.0, 1.0, 2.0, 2.0])


def test_the_host_is_the_device_and_a_query_costs_cpu() -> None:
    p = SimParams(analysis_threads=8, search_threads=1, max_batch=16, profile=CPU)
    busy = steady_state(p, 8, VISITS)
    assert busy.device_util == pytest.approx(1.0)  # 8 search threads keep both cores busy
    assert steady_state(p, 1, VISITS).device_util == pytest.approx(0.5)
    assert rps(concurrency=1) < rps(concurrency=2) < rps(concurrency=8)
    cfg = {"numAnalysisThreads": 8, "nnMaxBatchSize": 16}
    double = predict_throughput(cfg, 2 * VISITS, 8, profile=CPU)
    assert rps() / 2 < double < rps()  # twice the visits: less than twice the time (a fixed cost per query)


def test_profiles_are_named_and_unknown_ones_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    assert set(PROFILES) == {
        CPU,
        DEFAULT_PROFILE,
        "h200-b40c768",
        "h200-b28c512nbt",
        "h100-b40c768nbt",
        "h100-b10c384h6nbttflrs",
    }
    assert SimParams.from_cfg({}).profile == DEFAULT_PROFILE
    assert predict_throughput({"numAnalysisThreads": 64}, 500, 64) == predict_throughput(
        {"numAnalysisThreads": 64}, 500, 64, profile=DEFAULT_PROFILE
    )
    known = "cpu-eigen-b6c96, h100-b10c384h6nbttflrs, h100-b40c768nbt, h200-b11c768, h200-b28c512nbt, h200-b40c768"
    with pytest.raises(ValueError, match=f"unknown sim profile 'gpu9'; known: {known}"):
        get_profile("gpu9")
    monkeypatch.setenv("KGSERVE_SIM_PROFILE", CPU)
    assert Knobs.from_env().profile == CPU
    monkeypatch.setenv("KGSERVE_SIM_PROFILE", "")
    assert Knobs.from_env().profile == DEFAULT_PROFILE


def _run_sim(tmp_path: Path, profile: str) -> subprocess.CompletedProcess[str]:
    cfg = write_cfg(tmp_path, numAnalysisThreads=2, nnMaxBatchSize=8)
    query = '{"id":"q","moves":[],"rules":"tromp-taylor","komi":7.5,"boardXSize":19,"boardYSize":19,"maxVisits":8}\n'
    return subprocess.run(
        sim_argv(cfg),
        input=query,
        capture_output=True,
        text=True,
        env=sim_env(KGSERVE_SIM_PROFILE=profile),
        cwd=REPO,
        timeout=60,
    )


def test_the_sim_process_runs_the_chosen_profile(tmp_path: Path) -> None:
    run = _run_sim(tmp_path, CPU)
    assert run.returncode == 0, run.stderr
    assert "Found GPU CPU (Eigen backend, simulated)" in run.stderr
    assert '"id":"q"' in run.stdout
    bad = _run_sim(tmp_path, "tpu")
    assert bad.returncode == 1
    assert bad.stdout == ""
    known = "cpu-eigen-b6c96, h100-b10c384h6nbttflrs, h100-b40c768nbt, h200-b11c768, h200-b28c512nbt, h200-b40c768"
    assert f"Error: unknown sim profile 'tpu'; known: {known}" in bad.stderr


def test_the_profile_follows_a_synthetic_net_of_a_layout_it_stands_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without KGSERVE_SIM_PROFILE the sim stands for the net it is given: the pinned transformer's profile for a net of
    its layout, the b40 convnet's for a b40c768nbt, the default for its own stand-in net and for other layouts."""
    assert profile_for_model("synthetic-b11c768h12nbt3tflrs-fson-silu") == DEFAULT_PROFILE == "h200-b11c768"
    assert profile_for_model("kata1-tf3-b11c768-s11001M-d5973M") == "h200-b11c768"
    assert profile_for_model("kata1-zhizi-b40c768nbt-s11272M-d5935M") == "h200-b40c768"
    assert profile_for_model("kata1-b28c512nbt-s12223529728-d5663671073") == "h200-b28c512nbt"  # the public H200 grid's
    assert profile_for_model("kgsim-b40c768") is None and profile_for_model("synthetic-b2c32nbt") is None
    net = tmp_path / "b40.bin"
    net.write_bytes(b"synthetic-b40c768nbt\n15\n22\n19\n")  # the model name is all the sim reads of it
    monkeypatch.delenv("KGSERVE_SIM_PROFILE", raising=False)
    assert Knobs.from_env(str(net)).profile == "h200-b40c768"
    assert Knobs.from_env(str(tmp_path / "missing.bin")).profile == DEFAULT_PROFILE  # check_model reports it
    assert Knobs.from_env(str(REPO / "assets" / "sim" / "kgsim-b40c768.bin.gz")).profile == DEFAULT_PROFILE
    monkeypatch.setenv("KGSERVE_SIM_PROFILE", CPU)
    assert Knobs.from_env(str(net)).profile == CPU  # the knob wins
