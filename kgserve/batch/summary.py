"""The end of a run in figures: rows answered, errors by kind with example ids, rows/s, NN rows per visit."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Tally", "summary_text"]

EXAMPLES = 3  # example ids kept per error kind
_ROOT_VISITS = re.compile(r'"rootInfo":\{[^{}]*"visits":(\d+)')


@dataclass
class Tally:
    rows: int = 0
    answered: int = 0  # rows whose answer is analysis (not an error line)
    visits: int = 0  # the final lines' root visits, summed (what NN rows are divided by)
    errors: dict[str, list[str]] = field(default_factory=dict)  # kind -> example ids
    error_counts: dict[str, int] = field(default_factory=dict)

    def add(self, error: str | None, lines: list[str]) -> None:
        self.rows += 1
        if error is None:
            self.answered += 1
            for line in lines:
                if (match := _ROOT_VISITS.search(line)) is not None:
                    self.visits += int(match.group(1))
            return
        self.error_counts[error] = self.error_counts.get(error, 0) + 1
        examples = self.errors.setdefault(error, [])
        if len(examples) < EXAMPLES:
            examples.append(_caller_id(lines))

    @property
    def failed(self) -> int:
        return sum(self.error_counts.values())


def _caller_id(lines: list[str]) -> str:
    for line in lines:
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get("id"), str):
            return str(value["id"])
    return "(no id)"


def summary_text(
    tally: Tally,
    *,
    sent: int,
    elapsed_s: float,
    nn_rows: float | None,
    skipped: Mapping[str, str],
    retries: Mapping[str, int],
) -> str:
    """`sent`: rows answered by the target in this run (a resumed run's earlier rows are in the tally, not here)."""
    rate = sent / elapsed_s if elapsed_s > 0 else 0.0
    lines = [f"batch: {tally.rows} rows, {tally.answered} answered, {tally.failed} errors; "
             f"this run {sent} rows in {elapsed_s:.1f} s ({rate:.2f} rows/s)"]  # fmt: skip
    if nn_rows is not None and tally.visits > 0:
        lines.append(
            f"  NN rows per visit: {nn_rows / tally.visits:.3f} ({nn_rows:.0f} NN rows, {tally.visits} visits)"
        )
    if retries:
        reasons = ", ".join(f"{reason} x{count}" for reason, count in sorted(retries.items(), key=lambda i: -i[1]))
        lines.append(f"  attempts tried again: {sum(retries.values())} ({reasons})")
    for kind, count in sorted(tally.error_counts.items(), key=lambda item: -item[1]):
        lines.append(f"  error x{count}: {kind} (e.g. {', '.join(tally.errors[kind])})")
    for record, why in skipped.items():
        lines.append(f"  skipped record {record}: {why}")
    return "\n".join(lines)
