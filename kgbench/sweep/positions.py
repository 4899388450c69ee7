"""Where a job's requests come from (`load.traffic`, kgbench.load.kinds). Distinct positions: in a multirun, the
job's share of the sweep's one order, reserved in the sweep's ledger (kgbench.load.ledger), so that no two jobs of
a sweep send the same position; in a single run, its own seeded stream, as always. Games (review, interactive):
every job the same seeded order of games (each job starts its own engines: no NN cache carries over)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kgbench.load.games.library import GameFileError
from kgbench.load.kinds import Traffic, build_traffic, games_for
from kgbench.load.ledger import LEDGER_NAME, LedgerError, PositionLedger
from kgbench.load.traffic import Game, QuerySource
from kgbench.load.types import LoadSettings
from kgbench.sweep.failure import JobFailure
from kgbench.track.schema import POSITIONS, POSITIONS_LEDGER

__all__ = ["job_queries", "job_traffic", "position_metrics"]


def job_queries(
    seed: int, sweep_dir: Path | None, job: str, games: Sequence[Game] | None = None
) -> tuple[QuerySource, dict[str, str]]:
    """(the job's distinct-position source, the tags that say where its positions come from). ``seed``: the job's
    ``load.seed``; in a sweep the first job's seed orders the positions of every job. ``games``: what the positions
    are made of (default: the sample queries)."""
    own = QuerySource(games, seed=seed) if games is not None else QuerySource.from_dirs(seed=seed)
    if sweep_dir is None:
        return own, {POSITIONS: "run"}
    path = sweep_dir / LEDGER_NAME
    try:
        ledger = PositionLedger(path, seed=seed, positions=own.size, job=job)
    except (LedgerError, OSError) as exc:  # without the ledger the job would silently repeat other jobs' positions
        raise JobFailure(f"cannot reserve positions in the sweep's ledger {path}: {exc}") from None
    source = QuerySource(own.games, seed=ledger.seed, offsets=ledger.offsets())
    return source, {POSITIONS: "sweep", POSITIONS_LEDGER: str(path)}


def job_traffic(load: LoadSettings, sweep_dir: Path | None, job: str) -> tuple[Traffic, dict[str, str]]:
    """The job's traffic (``load.traffic`` over ``load.game_set``'s games) and its position tags."""
    try:
        games = games_for(load.game_set)
    except (GameFileError, ValueError) as exc:
        raise JobFailure(f"cannot read the traffic's games (load.games={load.game_set}): {exc}") from None
    wants_distinct = load.traffic == "distinct" or (load.traffic == "mixed" and load.mix.get("distinct", 0) > 0)
    if not wants_distinct:
        return build_traffic(load, games=games), {POSITIONS: "games"}
    distinct, tags = job_queries(load.seed, sweep_dir, job, games)
    try:
        return build_traffic(load, distinct, games), tags
    except ValueError as exc:
        raise JobFailure(f"cannot build load.traffic={load.traffic}: {exc}") from None


def position_metrics(source: Traffic) -> dict[str, float]:
    """How many positions (or games) the job handed out, and how many of them had been handed out before (in a
    sweep's distinct positions: by any of its jobs, once the sweep has used every distinct position)."""
    return {
        "positions_sent": float(source.sent),
        "position_repeats": float(source.repeats),
        "positions_distinct": float(source.size),
    }
