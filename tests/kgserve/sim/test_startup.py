"""Start-up and exit behaviour of the simulated engine: stderr lines, unused keys, missing model, OOM, benchmark."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.conftest import REFERENCE
from tests.kgserve.sim.conftest import MODEL, run_lines, sim_argv, sim_env, write_cfg

STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\+0000: ")


def _strip(text: str) -> list[str]:
    return [STAMP.sub("", line) for line in text.splitlines()]


def _run(argv: list[str], speed: float = 200.0) -> subprocess.CompletedProcess[str]:
    run = subprocess.run(argv, input=b"", capture_output=True, env=sim_env(speed), timeout=60)
    # keep carriage returns (the benchmark's progress lines): decode ourselves, no universal newlines
    return subprocess.CompletedProcess(argv, run.returncode, run.stdout.decode(), run.stderr.decode())


def test_unused_key_warning_like_reference(tmp_path: Path) -> None:
    cfg = write_cfg(tmp_path, name="typo.cfg", nnMaxBatchSze=32)
    run = _run([*sim_argv(cfg)])
    assert run.returncode == 0, run.stderr
    reference = _strip((REFERENCE / "protocol" / "startup_unused_cfg_key.stderr.log").read_text())
    block = [line.replace("typo.cfg", str(cfg)) for line in reference if "--------------" in line or "WARNING" in line]
    got = [line for line in _strip(run.stderr) if "--------------" in line or "WARNING" in line]
    assert got == block


def test_config_echo_and_ready_line(tmp_path: Path) -> None:
    cfg = write_cfg(tmp_path)
    lines = _strip(_run(sim_argv(cfg)).stderr)
    reference = _strip((REFERENCE / "engine-stderr.log").read_text())
    assert lines[: reference.index("")] == reference[: reference.index("")]  # the config echo, alias applied
    assert "Started, ready to begin handling requests" in lines
    assert any("SIMULATED" in line and "KataGo v1.17.2-sim" in line for line in lines)
    assert lines[-5:-2] == ["NN rows: 0", "NN batches: 0", "NN avg batch size: -nan"]
    assert lines[-1] == "All cleaned up, quitting"


def test_missing_model_aborts_like_katago(tmp_path: Path) -> None:
    run = _run(sim_argv(write_cfg(tmp_path), model="missing-model.bin.gz"))
    assert run.returncode == 134
    reference = (REFERENCE / "protocol" / "startup_missing_model.stderr.log").read_text().splitlines()
    assert run.stderr.splitlines()[-2:] == reference[-2:]
    assert "Started, ready" not in run.stderr


def test_out_of_device_memory(tmp_path: Path) -> None:
    # 1 + 4 x (0.71 + 16384 x 0.003) GiB: about 200 of the H200's 140 (the H100's NVML peaks, 3 MiB a row)
    run = _run(sim_argv(write_cfg(tmp_path, nnMaxBatchSize=16384, numNNServerThreadsPerModel=4)))
    assert run.returncode == 1
    assert "out of memory" in run.stderr and "Started, ready" not in run.stderr


def test_benchmark_output_format(tmp_path: Path) -> None:
    cfg = tmp_path / "bench.cfg"
    cfg.write_text((REFERENCE / "benchmark" / "benchmark.cfg").read_text())
    argv = [*sim_argv(cfg, command="benchmark"), "-v", "200", "-t", "1,2,4,8,16", "-n", "3"]
    run = _run(argv, speed=500.0)
    assert run.returncode == 0, run.stderr
    results = re.findall(
        r"numSearchThreads = +(\d+): 3 / 3 positions, visits/s = ([\d.]+) nnEvals/s = [\d.]+ "
        r"nnBatches/s = [\d.]+ avgBatchSize = [\d.]+ \([\d.]+ secs\) \(EloDiff ([^)]+)\)",
        run.stdout,
    )
    assert [r[0] for r in results] == ["1", "2", "4", "8", "16"]
    assert results[0][2] == "baseline" and all(re.fullmatch(r"[+-]\d+", r[2]) for r in results[1:])
    assert "\rnumSearchThreads =  1: 0 / 3 positions, visits/s = -nan (0.0 secs)" in run.stdout
    assert run.stdout.count("(recommended)") == 1
    assert "WARNING: Your nnMaxBatchSize is hardcoded to 16" in run.stdout


def test_benchmark_refuses_an_analysis_cfg(tmp_path: Path) -> None:
    run = _run([*sim_argv(write_cfg(tmp_path), command="benchmark"), "-v", "10", "-t", "1", "-n", "1"])
    reference = (REFERENCE / "benchmark" / "benchmark-with-analysis-cfg.stderr.log").read_text()
    assert run.returncode == 134
    assert run.stderr == reference.replace("analysis.cfg", str(tmp_path / "analysis.cfg"))


def test_model_path_is_checked_before_ready(tmp_path: Path) -> None:
    run = run_lines(write_cfg(tmp_path), ['{"id":"v","action":"query_version"}'])
    assert run.returncode == 0 and '"version":"1.17.2-sim"' in run.stdout[0]
    assert MODEL.name in run.stderr


def test_device_memory_is_shared_between_processes(tmp_path: Path) -> None:
    # the convnet profile's memory, linear in the batch: about 100 GiB of 140
    cfg = write_cfg(tmp_path, nnMaxBatchSize=16384, numNNServerThreadsPerModel=2)
    env = sim_env(200.0, KGSERVE_SIM_PROFILE="h200-b40c768")
    first = subprocess.Popen(
        sim_argv(cfg), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    try:
        assert first.stdin is not None and first.stdout is not None
        first.stdin.write(b'{"id":"v","action":"query_version"}\n')
        first.stdin.flush()
        assert b"query_version" in first.stdout.readline()  # started: its memory is allocated
        second = subprocess.run(sim_argv(cfg), input=b"", capture_output=True, env=env, timeout=60)
        assert second.returncode == 1 and b"out of memory" in second.stderr
        other_device = subprocess.run(
            sim_argv(cfg), input=b"", capture_output=True, env={**env, **sim_env(200.0)}, timeout=60
        )
        assert other_device.returncode == 0
    finally:
        first.communicate(timeout=60)
    assert first.returncode == 0
    third = subprocess.run(sim_argv(cfg), input=b"", capture_output=True, env=env, timeout=60)
    assert third.returncode == 0, third.stderr  # freed at exit


def test_num_analysis_threads_is_required(tmp_path: Path) -> None:
    cfg = tmp_path / "bare.cfg"
    cfg.write_text("maxVisits = 10\n")
    run = _run(sim_argv(cfg))
    assert run.returncode == 134
    assert run.stderr == (
        "terminate called after throwing an instance of 'IOError'\n"
        f"  what():  Could not find key 'numAnalysisThreads' in config file {cfg}\n"
    )
