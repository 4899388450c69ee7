"""What a sweep's jobs started from, read back from their runs: each its own kgserve and engines (the tag
`kgbench.cold_start`), and whether any position was sent twice in the sweep (kgbench.sweep.positions). The report
and the end-of-sweep summary state it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from mlflow.entities import Run

from kgbench.load.ledger import LEDGER_NAME
from kgbench.track.schema import COLD_START, POSITIONS

__all__ = ["ColdStart", "cold_start"]


_MEASURED = ("engine_start_s", "req_per_s", "visits_per_s", "position_repeat_rate")


@dataclass(frozen=True)
class ColdStart:
    jobs: int  # runs of the sweep that started an engine (a job that failed before that started nothing)
    cold: int  # of them, tagged kgbench.cold_start=true: their own kgserve and engines
    load_jobs: int  # runs that sent positions (mode=load; mode=engine runs `katago benchmark`'s own)
    from_ledger: int  # of them, positions reserved in the sweep's ledger
    sent: int  # positions handed out by the jobs that counted them
    repeats: int  # of them, handed out before in the sweep (the sweep used every distinct position)
    distinct: int | None  # distinct positions of the traffic
    games: int = 0  # load jobs whose traffic is games (review, interactive, batch: kgbench.load.kinds), one order

    def lines(self) -> list[str]:
        """Markdown list items for a report's summary: only what happened (no line when no job started)."""
        if self.jobs == 0:
            return []
        return [self._cold_line(), self._positions_line()]

    def _cold_line(self) -> str:
        line = (
            f"- cold start: {self.cold} of {self.jobs} jobs started their own kgserve and engines (kgserve "
            "restarted: empty NN cache, `engine_start_s` is the start-up, with TensorRT the engine build or its "
            "cache load)"
        )
        if self.cold < self.jobs:
            line += f"; {self.jobs - self.cold} recorded no `kgbench.cold_start` (a kgbench before the tag)"
        return line

    def _positions_line(self) -> str:
        if self.load_jobs == 0:
            return "- positions: no job sent positions (mode=engine: `katago benchmark` uses its own)"
        own = self.load_jobs - self.from_ledger - self.games
        games = (
            f"{self.games} job(s) sent games (review, interactive or batch traffic) in one order, each job on its own "
            "engines (no NN cache carries over between jobs)"
        )
        if self.from_ledger == 0 and own == 0:
            return f"- positions: {games}"
        if self.from_ledger == 0:
            return (
                f"- positions: not checked across jobs: the {own} job(s) drew their own positions (a kgbench "
                "before the sweep's ledger), so a job may have sent positions another job sent"
            )
        ledger = (
            f"each job reserved its share of one order in the sweep's ledger (`{LEDGER_NAME}` in the multirun folder)"
        )
        if self.repeats == 0:
            sent = f"{self.sent:,} sent by {self.from_ledger} job{'s' if self.from_ledger != 1 else ''}"
            line = f"- positions: unique across the sweep: {sent}, none twice; {ledger}"
        else:
            distinct = f" {self.distinct:,}" if self.distinct else ""
            line = (
                f"- positions: **{self.repeats:,} of {self.sent:,} were repeats**: the jobs used up the{distinct} "
                f"distinct positions and started the order again (per job: `position_repeat_rate`); {ledger}. An "
                "engine's NN cache does not outlive its job, but an HTTP or OS cache could favour the later jobs"
            )
        if own:
            line += f"; {own} job(s) drew their own positions (a kgbench before the ledger): not counted"
        return line + (f"; {games}" if self.games else "")


def cold_start(runs: Iterable[Run]) -> ColdStart:
    jobs = cold = load_jobs = from_ledger = sent = repeats = games = 0
    distinct: int | None = None
    for run in runs:
        tags, metrics = run.data.tags, run.data.metrics
        if not any(name in metrics for name in _MEASURED):
            continue  # failed before its engine started: nothing to say about what it started from
        jobs += 1
        cold += tags.get(COLD_START) == "true"
        if "position_repeat_rate" not in metrics and "positions_sent" not in metrics:
            continue
        load_jobs += 1
        games += tags.get(POSITIONS) == "games"
        if tags.get(POSITIONS) != "sweep":
            continue
        from_ledger += 1
        sent += int(metrics.get("positions_sent", 0))
        repeats += int(metrics.get("position_repeats", 0))
        if "positions_distinct" in metrics:
            distinct = int(metrics["positions_distinct"])
    return ColdStart(jobs, cold, load_jobs, from_ledger, sent, repeats, distinct, games)
