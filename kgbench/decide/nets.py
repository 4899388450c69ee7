"""A sweep's runs by network: several nets side by side (`python -m kgbench -m net=A,B`), each with its own best run.

Promote's rule picks a cfg within one network: req/s of two nets are not comparable as a choice, because the nets
differ in strength and this project measures speed, never strength (docs/runbook.md, "Which network is the
strongest"). So a report or a sweep's end with runs of several nets shows each net's best run (req/s, NN evals/s,
MFU, FLOPs per evaluation) side by side, and says that choosing between them is the user's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
from mlflow.entities import Run

from kgbench.decide import runs as runlib
from kgbench.decide.selection import Selection, choose_winner
from kgbench.track.schema import MODEL_FILE, NET_ARCH, NET_GFLOPS_PER_EVAL, NET_NAME, SYNTHETIC_NET

__all__ = ["CHOICE_NOTE", "NetBest", "by_net", "net_bests", "net_of", "nets_frame"]

CHOICE_NOTE = (
    "promote chooses a cfg within one network; which network to serve is the user's choice: strength is not "
    "measured here (docs/runbook.md, 'Which network is the strongest'), only speed"
)


def net_of(run: Run) -> str:
    """The network a run ran: the model name read off its file (a synthetic net's starts with `synthetic-`), else
    the file's name (the simulated engine's stand-in), else "?"."""
    tags = run.data.tags
    return tags.get(NET_NAME) or tags.get(MODEL_FILE) or "?"


def by_net(runs: Sequence[Run]) -> dict[str, list[Run]]:
    """The runs grouped by network, in the order the networks first appear."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(net_of(run), []).append(run)
    return groups


@dataclass(frozen=True)
class NetBest:
    net: str
    runs: list[Run]
    selection: Selection  # promote's rule among this net's runs (simulated and synthetic runs allowed)

    @property
    def best(self) -> Run | None:
        winner = self.selection.winner
        return next((r for r in self.runs if winner is not None and r.info.run_id == winner.run_id), None)


def net_bests(runs: Sequence[Run], *, allow_synthetic: bool = True) -> list[NetBest]:
    """Each network's best run by promote's rule (simulated runs allowed; synthetic ones unless told not to), the
    fastest network's first."""
    out = [
        NetBest(
            net,
            group,
            choose_winner(runlib.candidates(group), allow_simulated=True, allow_synthetic=allow_synthetic),
        )
        for net, group in by_net(runs).items()
    ]

    def rate(nb: NetBest) -> float:
        best = nb.best
        value = best.data.metrics.get("req_per_s") if best is not None else None
        return value if value is not None and math.isfinite(value) else -math.inf

    return sorted(out, key=rate, reverse=True)


def nets_frame(bests: Sequence[NetBest]) -> pd.DataFrame:
    """One row per network: its architecture, FLOPs per evaluation, whether it is synthetic, how many runs, and its
    best run's req/s, NN evals/s and MFU."""
    rows = []
    for nb in bests:
        first = nb.runs[0].data.tags
        best = nb.best
        metrics = best.data.metrics if best is not None else {}
        gflop = first.get(NET_GFLOPS_PER_EVAL)
        rows.append(
            {
                "net": nb.net,
                "arch": first.get(NET_ARCH, ""),
                "synthetic": first.get(SYNTHETIC_NET) == "true",
                "gflop_per_eval": float(gflop) if gflop else math.nan,
                "runs": len(nb.runs),
                "best_run": best.info.run_id[:8] if best is not None else "-",
                "req_per_s": metrics.get("req_per_s", math.nan),
                "nn_evals_per_s": metrics.get("nn_evals_per_s", math.nan),
                "mfu": metrics.get("mfu", math.nan),
                "p99_ms": metrics.get("p99_ms", math.nan),
            }
        )
    return pd.DataFrame(rows)
