"""The long differential run: N generated queries to the sim and to a real KataGo, a table of the outcome.

    export KGBENCH_KATAGO_BIN=/path/to/katago KGBENCH_KATAGO_MODEL=/path/to/model.bin.gz
    PYTHONPATH=. python -m tests.differential.run_long --seed 20261122 --cases 5000

Prints a Markdown table (cases and real-engine outcomes per category, differences) and the first
differences in full; exits 1 when any case differs, 2 when the variables are unset.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter

from kgserve.sim.board import EMPTY
from kgserve.sim.queries import Defaults, parse_query
from tests.differential.generate import CATEGORIES
from tests.differential.runner import Report, run_differential


def table(report: Report, seconds: float) -> str:
    rows = [
        f"seed {report.seed}, {len(report.cases)} cases, {len(report.diffs)} with differences, {seconds:.0f} s",
        "",
        "| category | cases | KataGo: error | warning + analysis | analysis | differences |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for category in [name for name in CATEGORIES if report.categories[name]]:
        diffs = sum(1 for case in report.cases if case.category == category and case.id in report.diffs)
        counts = [report.outcomes[(category, o)] for o in ("error", "warning+analysis", "analysis")]
        rows.append(f"| {category} | {report.categories[category]} | " + " | ".join(map(str, counts)) + f" | {diffs} |")
    totals = [sum(report.outcomes[(c, o)] for c in CATEGORIES) for o in ("error", "warning+analysis", "analysis")]
    rows.append(f"| all | {len(report.cases)} | " + " | ".join(map(str, totals)) + f" | {len(report.diffs)} |")
    rows += ["", "| what KataGo answered (error and warning kinds) | lines |", "|---|---:|"]
    rows += [f"| {kind.replace('|', '/')} | {n} |" for kind, n in sorted(report.notices.items(), key=lambda kv: -kv[1])]
    return "\n".join(rows)


def coverage(report: Report) -> str:
    """Go situations among the analysed positions, counted with the sim's board (it agreed with KataGo on every
    case of a run without differences): how often the -1 entries of a policy had something to show."""
    counts: Counter[str] = Counter()
    for case in report.cases:
        query = case.query()
        if query is None or not isinstance(query.get("id"), str) or isinstance(query.get("action"), str):
            continue
        for req in parse_query(query, Defaults(), lambda line: None):
            board, player = req.board, req.to_move
            counts["analysed positions"] += 1
            free = {loc for loc in req.illegal if board.stones[loc] == EMPTY and loc != board.ko_loc}
            counts["with a simple-ko ban"] += board.ko_loc is not None
            counts["with a superko ban"] += any(not board.is_suicide(loc, player) for loc in free)
            counts["with a multi-stone suicide the rules forbid"] += any(
                not board.is_illegal_suicide(loc, player, True) for loc in free if board.is_suicide(loc, player)
            )
    return "\n".join(["| analysed positions | count |", "|---|---:|"] + [f"| {k} | {n} |" for k, n in counts.items()])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--cases", type=int, default=5000)
    parser.add_argument("--show", type=int, default=20, help="differences printed in full")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per engine")
    parser.add_argument("--only", default="", help="comma-separated categories to draw from (default: all)")
    args = parser.parse_args(argv)
    binary, model = os.environ.get("KGBENCH_KATAGO_BIN"), os.environ.get("KGBENCH_KATAGO_MODEL")
    if not binary or not model:
        print("set KGBENCH_KATAGO_BIN and KGBENCH_KATAGO_MODEL to a KataGo binary and network", file=sys.stderr)
        return 2
    start = time.monotonic()
    only = tuple(name for name in args.only.split(",") if name)
    unknown = sorted(set(only) - set(CATEGORIES))
    if unknown:
        print(f"unknown categories {unknown}; they are {sorted(CATEGORIES)}", file=sys.stderr)
        return 2
    report = run_differential(args.seed, args.cases, binary, model, args.timeout, only)
    print(table(report, time.monotonic() - start))
    print()
    print(coverage(report))
    lines = {case.id: case.line for case in report.cases}
    for case_id in list(report.diffs)[: args.show]:
        print(f"\n{case_id}: {lines[case_id]}")
        for item in report.diffs[case_id]:
            print(f"  {item}")
    if report.stray:
        print(f"\n{len(report.stray)} lines with an unknown id, e.g. {report.stray[:3]}")
    return 1 if report.diffs or report.stray else 0


if __name__ == "__main__":
    sys.exit(main())
