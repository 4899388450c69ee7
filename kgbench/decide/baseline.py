"""What a node's users reached before this tool: the best `katago benchmark` point of their own grid, put beside a
sweep's served best for the same net and card, so the report says by how much the sweep beats it.

One such grid is public (docs/data/issue42/, docs/throughput-model.md "The H200 against its public record"): the
mission's node `hopper-34`, one H200, KataGo v1.16.4, `kata1-b28c512nbt-s12223529728-d5663671073`, `katago benchmark`
with search threads = batch size from 64 to 384, CUDA and TensorRT. A benchmark searches one position at a time with
all its threads and reports visits/s; a served job answers many queries at once, so the two meet in visits/s, and in
req/s at the job's own visits per query (the benchmark's visits/s over the visits a query of the job searches).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mlflow.entities import Run

from kgbench.track.schema import GPU_NAME, NET_ARCH, NET_NAME, SIMULATED

__all__ = ["PUBLIC_GRIDS", "BenchBaseline", "Comparison", "baseline_for", "baseline_text", "compare"]


@dataclass(frozen=True)
class BenchBaseline:
    arch: str  # the net's layout, as kgbench.nets labels it (NetDescription.architecture)
    card: str  # a word every name of the card contains ("H200")
    node: str
    net: str
    katago: str
    backend: str
    threads: int  # = the batch size (-fixed-batch-size)
    visits_per_s: float
    source: str

    @property
    def label(self) -> str:
        return (
            f"the {self.node} users' `katago benchmark` grid's best point ({self.backend} {self.threads} threads = "
            f"batch {self.threads}, KataGo {self.katago}, {self.net}): {self.visits_per_s:,.0f} visits/s"
        )


PUBLIC_GRIDS: tuple[BenchBaseline, ...] = (
    BenchBaseline(
        arch="b28c512nbt",
        card="H200",
        node="hopper-34",
        net="kata1-b28c512nbt-s12223529728-d5663671073",
        katago="v1.16.4",
        backend="TensorRT 8.6.1",
        threads=384,
        visits_per_s=5138.0,
        source="hawkoli1987/KataGo runtime/benchmark/results/20260119_122335 (docs/data/issue42/)",
    ),
)


@dataclass(frozen=True)
class Comparison:
    baseline: BenchBaseline
    req_per_s: float
    visits_per_s: float
    simulated: bool

    @property
    def visits_per_query(self) -> float:
        return self.visits_per_s / self.req_per_s

    @property
    def baseline_req_per_s(self) -> float:
        """The benchmark's visits/s as queries of the job's size."""
        return self.baseline.visits_per_s / self.visits_per_query

    @property
    def gain(self) -> float:
        return self.visits_per_s / self.baseline.visits_per_s - 1.0

    def line(self) -> str:
        verdict = "beats it by" if self.gain >= 0 else "falls short of it by"
        label = "SIMULATED (the sim's profile for this net on this card, not a measurement): " if self.simulated else ""
        return (
            f"{label}served best {self.req_per_s:,.1f} req/s = {self.visits_per_s:,.0f} visits/s at "
            f"{self.visits_per_query:,.0f} visits a query, against {self.baseline.label} = "
            f"{self.baseline_req_per_s:,.1f} req/s of that size: the sweep {verdict} {abs(self.gain):.0%} "
            f"(source: {self.baseline.source})"
        )


def baseline_for(arch: str | None, card: str | None, simulated: bool) -> BenchBaseline | None:
    """The public grid for this net's layout on this card; a simulated run stands for the card its profile names
    (the sim's profile for a net of that layout is the H200's: kgserve.sim.model.profiles.profile_for_model)."""
    for grid in PUBLIC_GRIDS:
        same_net = bool(arch) and grid.arch in str(arch)
        same_card = simulated or (bool(card) and grid.card.lower() in str(card).lower())
        if same_net and same_card:
            return grid
    return None


def compare(arch: str | None, card: str | None, metrics: Mapping[str, float], simulated: bool) -> Comparison | None:
    """The job's served figures beside the public grid that applies to it, or None (another net or card, or a job
    that measured no visits/s)."""
    grid = baseline_for(arch, card, simulated)
    req, visits = metrics.get("req_per_s"), metrics.get("visits_per_s")
    if grid is None or not req or not visits or req <= 0 or visits <= 0:
        return None
    return Comparison(grid, float(req), float(visits), simulated)


def baseline_text(run: Run) -> str | None:
    """A job beside the best `katago benchmark` point its node's users reached with the same net, or None where no
    public grid is of that net and card (the sweep's report and the qualification's headline)."""
    tags = run.data.tags
    simulated = tags.get(SIMULATED) == "true"
    found = compare(tags.get(NET_ARCH) or tags.get(NET_NAME), tags.get(GPU_NAME), run.data.metrics, simulated)
    return found.line() if found else None
