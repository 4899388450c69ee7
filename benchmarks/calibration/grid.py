"""The calibration grid: the cfgs held against the real engine, and what one measured point is worth."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GRID", "Point", "capacity", "usable_cores"]


@dataclass(frozen=True)
class Point:
    analysis_threads: int
    search_threads: int
    max_batch: int
    server_threads: int

    @property
    def label(self) -> str:
        return f"{self.analysis_threads}x{self.search_threads} b{self.max_batch} s{self.server_threads}"

    def cfg(self) -> dict[str, int]:
        return {
            "numAnalysisThreads": self.analysis_threads,
            "numSearchThreadsPerAnalysisThread": self.search_threads,
            "nnMaxBatchSize": self.max_batch,
            "numNNServerThreadsPerModel": self.server_threads,
        }


# (numAnalysisThreads, numSearchThreadsPerAnalysisThread, nnMaxBatchSize, numNNServerThreadsPerModel): one search
# thread (NN and tree work alternating on one core), up to 16 search threads per position (wasted evaluations),
# up to 32 positions at once on 2 cores; batches too small and large enough; server threads 1 and 2 (ignored by
# the Eigen backend, so those pairs must come out alike)
GRID: tuple[Point, ...] = tuple(
    Point(*t)
    for t in (
        (1, 1, 1, 1),
        (1, 1, 8, 2),
        (1, 2, 2, 1),
        (1, 4, 4, 1),
        (1, 8, 8, 1),
        (1, 16, 16, 2),
        (2, 8, 16, 1),
        (2, 4, 8, 2),
        (2, 1, 2, 1),
        (4, 1, 4, 1),
        (4, 2, 8, 1),
        (8, 1, 8, 1),
        (8, 1, 16, 2),
        (16, 1, 16, 1),
        (16, 1, 4, 1),
        (32, 1, 32, 2),
    )
)


def usable_cores(point: Point, cores: int) -> int:
    return max(1, min(cores, point.analysis_threads * point.search_threads))


def capacity(point: Point, cpu_per_query: float, cores: int) -> float:
    return usable_cores(point, cores) / max(cpu_per_query, 1e-9)
