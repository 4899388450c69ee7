"""Parsing kgserve's log: the engines' exit statistics and KataGo's `Unused key` warnings."""

from __future__ import annotations

from pathlib import Path

from kgbench.kgserve_proc import find_unused_keys, parse_nn_stats

REF = Path(__file__).resolve().parents[1] / "data" / "katago-reference"


def as_kgserve_log(text: str, index: int) -> str:
    return "\n".join(f"engine[{index}] stderr: {line}" for line in text.splitlines())


def test_nn_stats_of_the_real_engine_log() -> None:
    log = as_kgserve_log((REF / "engine-stderr.log").read_text(), 0)
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
    log = as_kgserve_log((REF / "protocol" / "startup_unused_cfg_key.stderr.log").read_text(), 0)
    assert parse_nn_stats(log) == {"nn_rows": 0.0, "nn_batches": 0.0}  # "-nan" average: absent


def test_unused_keys_of_the_real_warning() -> None:
    log = as_kgserve_log((REF / "protocol" / "startup_unused_cfg_key.stderr.log").read_text(), 0)
    assert find_unused_keys(log) == ["nnMaxBatchSze"]
    assert find_unused_keys((REF / "engine-stderr.log").read_text()) == []
