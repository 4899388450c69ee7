"""Jobs sharing a TensorRT build run back to back: the pure grouping, and the grid sweeper's order in a real
Hydra multirun (a subprocess of `python -m kgbench --cfg` is not enough: the sweeper composes every job)."""

from __future__ import annotations

from kgbench.__main__ import with_grid_sweeper
from kgbench.sweep.grouping import build_key, group_jobs


def test_build_key_names_what_the_engine_is_built_for() -> None:
    assert build_key({"backend": "trt", "nnMaxBatchSize": 128, "trtUseFP16": True, "numAnalysisThreads": 64}) == (
        "trt nnMaxBatchSize=128 trtUseFP16=True"
    )
    assert build_key({"backend": "cuda", "nnMaxBatchSize": 128}) is None  # no engine build


def test_grid_jobs_grouped_by_build_in_order_of_first_appearance() -> None:
    # the user's order alternates batch sizes (threads vary slowest): four builds instead of two
    jobs = [("trt", 128, 64), ("trt", 256, 64), ("cuda", 128, 64), ("trt", 128, 128), ("trt", 256, 128)]

    def key(job: tuple[str, int, int]) -> str | None:
        return build_key({"backend": job[0], "nnMaxBatchSize": job[1]})

    assert group_jobs(jobs, key) == [
        ("trt", 128, 64), ("trt", 128, 128), ("trt", 256, 64), ("trt", 256, 128), ("cuda", 128, 64),
    ]  # fmt: skip
    assert group_jobs([], key) == []
    nones = [("cuda", 1, 1), ("cuda", 2, 2)]
    assert group_jobs(nones, key) == nones


def test_multirun_without_a_sweeper_gets_the_grid_sweeper() -> None:
    assert with_grid_sweeper(["-m", "x=1,2"]) == ["-m", "x=1,2", "hydra/sweeper=kgbench_grid"]
    assert with_grid_sweeper(["-m", "hparams_search=optuna"]) == ["-m", "hparams_search=optuna"]
    assert with_grid_sweeper(["-m", "hydra/sweeper=basic"]) == ["-m", "hydra/sweeper=basic"]
    assert with_grid_sweeper(["x=1"]) == ["x=1"]
