"""Send the same generated queries to the sim and to a real KataGo and collect the differences per case."""

from __future__ import annotations

import json
import re
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.differential.compare import differences, group_by_id
from tests.differential.engines import katago_spec, run_lines, sim_spec
from tests.differential.generate import Case, generate

__all__ = ["Report", "run_differential"]


@dataclass
class Report:
    seed: int
    cases: list[Case]
    diffs: dict[str, list[str]] = field(default_factory=dict)  # case id -> what differs
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)  # (category, outcome) -> cases
    stray: list[str] = field(default_factory=list)  # lines with an id no case has (or none at all)
    notices: Counter[str] = field(default_factory=Counter)  # KataGo's error and warning texts, by kind

    @property
    def categories(self) -> Counter[str]:
        return Counter(case.category for case in self.cases)


def _outcome(lines: list[str]) -> str:
    if any('"error":' in line for line in lines):
        return "error"
    if any('"warning":' in line for line in lines):
        return "warning+analysis"
    return "analysis"


def _notice_kind(line: str) -> str:
    """`error moves: Illegal move`, `warning rules: Rules ... not supported`: the text up to its first detail."""
    value = json.loads(line)
    kind = "error" if "error" in value else "warning"
    text = str(value.get(kind, ""))
    text = re.split(r"[:0-9]", text, maxsplit=1)[0].strip()
    words = text.split()
    field = "(any)" if text.startswith("Unexpected or unused field") else value.get("field", "-")
    return f"{kind} {field}: {' '.join(words[:6])}"


def run_differential(seed: int, count: int, binary: str, model: str, timeout_s: float = 1800.0) -> Report:
    cases = generate(seed, count)
    lines = [case.line for case in cases]
    outputs: dict[str, list[str]] = {}
    errors: list[BaseException] = []
    with tempfile.TemporaryDirectory(prefix="kgdiff-") as tmp:
        # one cfg file for both: its path is part of KataGo's overrideSettings error texts
        specs = {"real": katago_spec(Path(tmp), binary, model), "sim": sim_spec(Path(tmp))}

        def run(name: str) -> None:
            try:
                outputs[name] = run_lines(specs[name], lines, timeout_s)
            except BaseException as err:  # reported below, after both engines are done
                errors.append(err)

        threads = [threading.Thread(target=run, args=(name,)) for name in specs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]
    real, sim = group_by_id(outputs["real"]), group_by_id(outputs["sim"])
    report = Report(seed, cases)
    known = {case.id for case in cases}
    report.stray = [
        f"{name}: {line}"
        for name, lines_by_id in (("real", real), ("sim", sim))
        for key, found in lines_by_id.items()
        if key not in known
        for line in found
    ]
    for case in cases:
        query = json.loads(case.line)
        found = differences(query, real.get(case.id, []), sim.get(case.id, []))
        if found:
            report.diffs[case.id] = found
        report.outcomes[(case.category, _outcome(real.get(case.id, [])))] += 1
        report.notices.update(
            _notice_kind(line) for line in real.get(case.id, []) if '"error":' in line or '"warning":' in line
        )
    return report
