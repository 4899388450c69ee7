"""Parsing kgserve's log: the engines' exit statistics and KataGo's `Unused key` warnings."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from kgbench.targets.base import TargetError
from kgbench.targets.enginelog import find_unused_keys, parse_nn_stats
from kgbench.targets.kgserve_process import KgserveProcess, write_config
from kgserve.settings import load_settings
from tests.conftest import REFERENCE, REPO


def as_kgserve_log(text: str, index: int) -> str:
    return "\n".join(f"engine[{index}] stderr: {line}" for line in text.splitlines())


def test_nn_stats_of_the_real_engine_log() -> None:
    log = as_kgserve_log((REFERENCE / "engine-stderr.log").read_text(), 0)
    assert parse_nn_stats(log) == {"nn_rows": 46.0, "nn_batches": 46.0, "nn_avg_batch_size": 1.0}


def test_nn_stats_sum_over_engines() -> None:
    log = "\n".join(
        [
            "INFO kgserve listening on http://127.0.0.1:1234",
            "engine[0] stderr: 2026-11-22 05:27:07+0000: NN rows: 300",
            "engine[0] stderr: 2026-11-22 05:27:07+0000: NN batches: 10",
            "engine[0] stderr: 2026-11-22 05:27:07+0000: NN avg batch size: 30",
            "engine[1] stderr: 2026-11-22 05:27:07+0000: NN rows: 100",
            "engine[1] stderr: 2026-11-22 05:27:07+0000: NN batches: 10",
            "engine[1] stderr: 2026-11-22 05:27:07+0000: NN avg batch size: 10",
        ]
    )
    assert parse_nn_stats(log) == {"nn_rows": 400.0, "nn_batches": 20.0, "nn_avg_batch_size": 20.0}


def test_no_stats_and_nan_average() -> None:
    assert parse_nn_stats("kgserve listening on http://127.0.0.1:1") == {}
    log = as_kgserve_log((REFERENCE / "protocol" / "startup_unused_cfg_key.stderr.log").read_text(), 0)
    assert parse_nn_stats(log) == {"nn_rows": 0.0, "nn_batches": 0.0}  # "-nan" average: absent


def test_unused_keys_of_the_real_warning() -> None:
    log = as_kgserve_log((REFERENCE / "protocol" / "startup_unused_cfg_key.stderr.log").read_text(), 0)
    assert find_unused_keys(log) == ["nnMaxBatchSze"]
    assert find_unused_keys((REFERENCE / "engine-stderr.log").read_text()) == []


def fake_kgserve(tmp_path: Path, body: str) -> KgserveProcess:
    """A KgserveProcess whose command is a small script standing in for kgserve (real subprocess)."""
    script = tmp_path / "fake_kgserve.py"
    script.write_text(body)
    proc = KgserveProcess(tmp_path / "unused.yaml", tmp_path / "kgserve_stderr.log")
    proc.argv = [sys.executable, str(script)]
    return proc


def test_unused_key_warning_fails_the_start_at_once(tmp_path: Path) -> None:
    proc = fake_kgserve(
        tmp_path,
        "import sys, time\n"
        "print('INFO kgserve listening on http://127.0.0.1:9', file=sys.stderr, flush=True)\n"
        "print(\"engine[0] stderr: WARNING: Unused key 'nnMaxBatchSze' in job.cfg\", file=sys.stderr, flush=True)\n"
        "time.sleep(60)\n",
    )
    proc.start()
    try:
        with pytest.raises(TargetError, match=r"Unused key.*'nnMaxBatchSze'"):
            proc.wait_ready(30)
    finally:
        code = proc.stop(grace_s=1)
    assert code is not None
    assert "Unused key" in (tmp_path / "kgserve_stderr.log").read_text()


def test_kgserve_exiting_at_start_up_is_a_one_line_reason(tmp_path: Path) -> None:
    proc = fake_kgserve(
        tmp_path,
        "import sys\n"
        "print('kgserve cannot start the cuda engine: the engine binary /x/katago does not exist.', file=sys.stderr)\n"
        "sys.exit(2)\n",
    )
    proc.start()
    with pytest.raises(TargetError) as info:
        proc.wait_ready(30)
    assert "status 2" in str(info.value) and "/x/katago" in str(info.value)
    proc.stop(grace_s=1)


def test_not_ready_in_time(tmp_path: Path) -> None:
    proc = fake_kgserve(tmp_path, "import time\ntime.sleep(60)\n")
    proc.start()
    try:
        with pytest.raises(TargetError, match=r"not ready within 0\.5 s"):
            proc.wait_ready(0.5)
    finally:
        proc.stop(grace_s=1)


def test_the_benchmarks_kgserve_has_no_thread_reserve(tmp_path: Path) -> None:
    """The benchmarks' kgserve (write_config) has one client, their load generator: no reserve, caps wide open. A
    sweep job's kgserve keeps the runtime's (tests/kgbench/sweep/test_job_parts.py, issue 33)."""
    config = yaml.safe_load(write_config(load_settings(REPO / "runtime" / "config.yaml"), tmp_path).read_text())
    assert config["engine"]["thread_reserve"] == 0
    assert config["limits"]["max_inflight_per_client"] == config["limits"]["max_inflight_queries"]
