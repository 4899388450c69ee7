"""benchmarks.search_faults: its table from the records docs/sweeps.md quotes (the runs themselves are what
tests/kgbench/search/test_search_faults_sim.py checks)."""

from __future__ import annotations

import json

from benchmarks.search_faults import table
from tests.conftest import REPO

DATA = REPO / "docs" / "data" / "issue36" / "search"


def test_the_table_reads_the_saved_records_before_and_after() -> None:
    after = table(json.loads((DATA / "branch.json").read_text()))
    before = table(json.loads((DATA / "base-785ee1b.json").read_text()))
    assert "| fixed keys after a search | exit 0, 2 job(s) run" in after
    assert "| fixed keys after a search | exit 1, 0 job(s) run" in before
    assert "failed values passed on: 0, same best: True" in after
    assert "failed values passed on: 2, same best: False" in before
    assert "killed trial measured on the rerun: True, trials left RUNNING: 0" in after
    assert "| overhead | condition: sha256 of" in after and "overhead" not in before
