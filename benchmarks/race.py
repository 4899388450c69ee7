"""`python -m benchmarks.race`: how many rounds the race of the contenders needs (kgbench.decide.race's defaults).

The race's own code (`run_race`: interleaved rounds, intervals from the replicates, contenders dropped once their
interval clears the leader's) on two contenders whose true req/s differ by a given gap, each replicate measured with
a relative noise (default 3%: on a quiet machine two runs of the real CPU grid agreed per config within 0.96-1.05,
issue 28). For each gap and round budget it reports how often the race separated them, how often the one left (or
the leader, when they stayed tied) is the truly faster, and the replicates spent.

    python -m benchmarks.race --noise 0.03 --races 400
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections.abc import Sequence

from kgbench.decide.race import RaceSettings, run_race

__all__ = ["main", "race_figures"]


def race_figures(gap: float, rounds: int, noise: float, races: int, seed: int = 0) -> tuple[float, float, float]:
    """(share separated, share that kept the truly faster one first, mean replicates spent) over ``races``."""
    rng = random.Random(seed)
    truth = {"fast": 1.0 + gap, "slow": 1.0}
    separated = right = 0
    spent: list[int] = []
    for _ in range(races):

        def measure(order: list[str], round_no: int) -> dict[str, float | None]:
            shared = rng.gauss(1.0, noise / 2)  # a round's common drift: interleaving makes both feel it
            return {run: truth[run] * shared * rng.gauss(1.0, noise) for run in order}

        first = rng.choice((["fast", "slow"], ["slow", "fast"]))  # the sweep's own (noisy) order of the two
        outcome = run_race(first, measure, RaceSettings(max_rounds=rounds))
        separated += len(outcome.tied) == 1
        left = max(outcome.tied, key=lambda run: statistics.mean(outcome.values[run] or [0.0]))
        right += left == "fast"
        spent.append(len(outcome.order))
    return separated / races, right / races, statistics.mean(spent)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.race", description=__doc__.split("\n\n")[0])
    p.add_argument("--noise", type=float, default=0.03, help="relative sd of one replicate's req/s")
    p.add_argument("--races", type=int, default=400)
    p.add_argument("--gaps", type=float, nargs="+", default=[0.0, 0.03, 0.05, 0.10, 0.20])
    p.add_argument("--rounds", type=int, nargs="+", default=[2, 3, 4, 6])
    args = p.parse_args(argv)
    print(f"two contenders, replicate noise {args.noise:.0%} (plus a shared drift per round of half that), "
          f"{args.races} races per cell\n")  # fmt: skip
    print("| true gap | max rounds | separated | the faster one left or leading | replicates spent (mean) |")
    print("|---:|---:|---:|---:|---:|")
    for gap in args.gaps:
        for rounds in args.rounds:
            sep, right, spent = race_figures(gap, rounds, args.noise, args.races)
            print(f"| {gap:.0%} | {rounds} | {sep:.0%} | {right:.0%} | {spent:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
