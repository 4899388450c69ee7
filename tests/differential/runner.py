"""Send the same generated queries to the sim and to a real KataGo and collect the differences per case.

Lines answered without an id (not JSON, not an object, no string id, an unknown action) are matched to their case
by order: each case line is followed by a marker line that both engines answer with a known error line, and
KataGo writes the lines it answers without an id in the order it reads them, as the sim does. Each engine's
model path in its texts (a humanSLProfile the net does not use) reads `<model>`.
"""

from __future__ import annotations

import json
import re
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import SIM_MODEL
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
    stray: list[str] = field(default_factory=list)  # lines without an id after the last marker
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


def _marker(index: int) -> str:
    return f'["kgdiff-case-end",{index}]'


def _marker_answer(index: int) -> str:
    return "Request line was valid json but was not an object, ignoring: " + _marker(index)


def _split(lines: list[str], count: int) -> tuple[list[str], list[list[str]], list[str]]:
    """(lines with an id, the lines without one per case, those after the last marker)."""
    with_id, segments, current = [], [[] for _ in range(count)], 0
    leftover: list[str] = []
    for line in lines:
        value = json.loads(line)
        if isinstance(value, dict) and "id" in value:
            with_id.append(line)
        elif current < count and value.get("error") == _marker_answer(current):
            current += 1
        else:
            (segments[current] if current < count else leftover).append(line)
    return with_id, segments, leftover


def _compare(report: Report, outputs: dict[str, list[str]]) -> None:
    cases = report.cases
    real_lines, real_segments, real_left = _split(outputs["real"], len(cases))
    sim_lines, sim_segments, sim_left = _split(outputs["sim"], len(cases))
    real, sim = group_by_id(real_lines), group_by_id(sim_lines)
    report.stray = [f"real: {line}" for line in real_left] + [f"sim: {line}" for line in sim_left]
    for index, case in enumerate(cases):
        real_answer = real.get(case.id, []) + real_segments[index]
        found = differences(case.query(), real_answer, sim.get(case.id, []) + sim_segments[index])
        if found:
            report.diffs[case.id] = found
        report.outcomes[(case.category, _outcome(real_answer))] += 1
        report.notices.update(_notice_kind(line) for line in real_answer if '"error":' in line or '"warning":' in line)
    known = {case.id for case in cases}
    for other in sorted((set(real) | set(sim)) - known):  # an id no case has: a line whose id a mutation changed
        found = differences(None, real.get(other, []), sim.get(other, []))
        if found:
            report.diffs[f"(no case) {other}"] = found


def run_differential(
    seed: int, count: int, binary: str, model: str, timeout_s: float = 1800.0, only: tuple[str, ...] = ()
) -> Report:
    cases = generate(seed, count, only)
    lines = [text for index, case in enumerate(cases) for text in (case.line, _marker(index))]
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
    outputs["real"] = [line.replace(model, "<model>") for line in outputs["real"]]
    outputs["sim"] = [line.replace(str(SIM_MODEL), "<model>") for line in outputs["sim"]]
    report = Report(seed, cases)
    _compare(report, outputs)
    return report
