"""benchmarks.traffic (issue 35's rounds): the rounds alternate their configs, the saved args name no machine path,
and the report reads the committed rounds (contended jobs marked and left out of the means, the cache shares)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.traffic import _named, cache_shares, report, scenario_args
from kgserve.paths import PROJECT_ROOT

ROUNDS = PROJECT_ROOT / "docs" / "data" / "issue35"


def test_even_rounds_run_the_configs_in_the_reverse_order() -> None:
    odd, even = scenario_args("cache", 1, "review", False), scenario_args("cache", 2, "review", False)
    assert "nnCacheSizePowerOfTwo=-1,4,6,8,10,12,16,23" in odd
    assert "nnCacheSizePowerOfTwo=23,16,12,10,8,6,4,-1" in even
    grid = scenario_args("grid", 2, "distinct", False)
    assert "load=cpu" in grid and "numAnalysisThreads=4,2,1" in grid
    assert "load=review" in scenario_args("grid", 1, "review", False)


def test_a_rounds_saved_args_name_the_engine_by_its_variables() -> None:
    args = ["load=review", "engine.binary=/opt/katago/katago", "engine.model=/nets/net.bin.gz"]
    assert _named(args) == ["load=review", "engine.binary=$KGBENCH_KATAGO_BIN", "engine.model=$KGBENCH_KATAGO_MODEL"]


def test_the_report_reads_the_committed_rounds(tmp_path: Path) -> None:
    saved = sorted(ROUNDS.glob("*-r[0-9]*.json"))
    assert {p.stem for p in saved} >= {"cache-r1", "cache-r2", "pair-r1", "grid-distinct-r2", "grid-review-r2"}
    for path in saved:  # every committed round names the engine by its variables, never a machine path
        record = json.loads(path.read_text())
        assert not any("/" in a.split("=", 1)[1] for a in record["args"] if a.startswith("engine."))
    text = report(ROUNDS)
    assert "### cache (load average" in text and "### grid-review" in text
    assert "c / " in text or "c |" in text  # contended jobs are marked
    assert cache_shares([json.loads(p.read_text()) for p in saved]).startswith("cache shares: r(-1) 1.067")
    # a folder without rounds reports what it lacks instead of failing
    assert "needs the cache rounds" in report(tmp_path)


def test_the_batch_rounds_send_no_maxvisits_and_the_report_reads_issue_40s() -> None:
    """load=batch's queries carry no maxVisits (the cfg's 16 instead of BASE's load.max_visits=16), beside its review
    and distinct twins; issue 40's committed rounds are read like issue 35's."""
    batch = scenario_args("beside", 1, "batch", False)
    assert "load=batch" in batch and "maxVisits=16" in batch and not any(a.startswith("load.max_visits") for a in batch)
    assert scenario_args("beside", 1, "distinct", False) == ["load=cpu"]
    assert "numAnalysisThreads=1,2,4" in scenario_args("grid", 1, "batch", False)
    assert scenario_args("h200", 1, "batch", False) == ["experiment=h200"]  # the experiment's own traffic
    assert "load=default" in scenario_args("h200", 1, "distinct", False)
    rounds = PROJECT_ROOT / "docs" / "data" / "issue40"
    for path in sorted(rounds.glob("*-r[0-9]*.json")):
        record = json.loads(path.read_text())
        assert not any("/" in a.split("=", 1)[1] for a in record["args"] if a.startswith("engine."))
        assert not any(a.startswith("load.max_visits") for a in record["args"]) or "load=batch" not in record["args"]
    text = report(rounds)
    assert "### grid-batch" in text and "### beside-batch" in text and "### beside-distinct" in text
