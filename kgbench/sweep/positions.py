"""Where a job's positions come from: in a multirun, its share of the sweep's one order, reserved in the
sweep's ledger (kgbench.load.ledger), so that no two jobs of a sweep send the same position; in a single run, its
own seeded stream, as always."""

from __future__ import annotations

from pathlib import Path

from kgbench.load.ledger import LEDGER_NAME, LedgerError, PositionLedger
from kgbench.load.traffic import QuerySource
from kgbench.sweep.failure import JobFailure
from kgbench.track.schema import POSITIONS, POSITIONS_LEDGER

__all__ = ["job_queries", "position_metrics"]


def job_queries(seed: int, sweep_dir: Path | None, job: str) -> tuple[QuerySource, dict[str, str]]:
    """(the job's query source, the tags that say where its positions come from). ``seed``: the job's
    ``load.seed``; in a sweep the first job's seed orders the positions of every job."""
    own = QuerySource.from_dirs(seed=seed)
    if sweep_dir is None:
        return own, {POSITIONS: "run"}
    path = sweep_dir / LEDGER_NAME
    try:
        ledger = PositionLedger(path, seed=seed, positions=own.size, job=job)
    except (LedgerError, OSError) as exc:  # without the ledger the job would silently repeat other jobs' positions
        raise JobFailure(f"cannot reserve positions in the sweep's ledger {path}: {exc}") from None
    source = QuerySource(own.games, seed=ledger.seed, offsets=ledger.offsets())
    return source, {POSITIONS: "sweep", POSITIONS_LEDGER: str(path)}


def position_metrics(source: QuerySource) -> dict[str, float]:
    """How many positions the job handed out, and how many of them had been handed out before (in a sweep: by any
    of its jobs, once the sweep has used every distinct position)."""
    return {
        "positions_sent": float(source.sent),
        "position_repeats": float(source.repeats),
        "positions_distinct": float(source.size),
    }
