"""The sweeps' harnesses of issue 28 run and report (behaviour: what they count and print, never how fast)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.contention import BASE, SEARCH, report, search_budget_s
from benchmarks.race import race_figures
from benchmarks.search import grid_configs
from benchmarks.search_budget import SPACES, run_one, summary_table
from kgbench.__main__ import main as kgbench_main


def test_the_race_benchmark_separates_a_large_gap_and_not_an_empty_one() -> None:
    separated, right, spent = race_figures(0.3, 4, 0.03, 40)
    assert separated > 0.5 and right == 1.0 and 4 <= spent <= 8
    assert race_figures(0.0, 2, 0.03, 40)[0] < 0.2


def test_the_search_budget_benchmark_measures_the_budget_in_distinct_configs() -> None:
    outcomes = [run_one(SPACES["cpu"], sampler, 3, seed) for sampler in ("tpe-auto", "tpe-10 (old)") for seed in (0, 1)]
    assert all(o.measured == 3 for o in outcomes if o.sampler == "tpe-auto")
    assert all(0 < o.reached <= 1 and o.spent_s <= o.grid_s / 3 + 1e-9 for o in outcomes)
    assert "| tpe-auto | none | 3 | 3.0 | 33.3% / 33.3% |" in summary_table(outcomes)


def test_the_search_budget_benchmark_runs_the_start_and_a_job_second_budget() -> None:
    # a job-second budget of a third of the cpu grid (9 equal jobs) measures 3 configs whatever n_trials allows
    capped = [run_one(SPACES["cpu"], "tpe-auto", 9, seed, "katago", 1 / 3) for seed in (0, 1)]
    assert all(o.measured == 3 and o.spent_s <= o.grid_s / 3 + 1e-9 for o in capped)
    assert "| tpe-auto | katago | 9 | 3.0 | 33.3% / 33.3% |" in summary_table(capped)
    # a start of one trial: the search measures KataGo's advice (4 x 1) first, then what the sampler proposes
    land = SPACES["cpu"]
    optimum = max(max(land.level_values(cfg)) for cfg in grid_configs(land.space()))
    advice = max(land.level_values({"numAnalysisThreads": 4, "numSearchThreadsPerAnalysisThread": 1}))
    for seed in (0, 1, 2):
        one = run_one(land, "tpe-auto", 1, seed, "katago")
        assert one.measured == 1 and one.reached == advice / optimum


def _job(config: str, req: float, start: float, contended: str = "false", attempts: str = "measurement 1: clean",
         race_of: str | None = None) -> dict[str, object]:  # fmt: skip
    return {"run_id": config + str(start), "config": config, "status": "FINISHED", "start": start, "end": start + 30,
            "req_per_s": req, "req_per_s_ci_low": req - 1, "req_per_s_ci_high": req + 1, "p99_ms": 900.0,
            "other_cpu_cores": 0.05, "host_cpu_busy_pct": 99.0, "host_cpu_steal_pct": 0.0,
            "contention_other_cpu_cores_max": 0.1, "contention_remeasures": 0.0, "contended_windows": 0.0,
            "judged_windows": 3.0, "contended": contended, "contention": "", "attempts": attempts,
            "race_of": race_of, "race_round": None, "trial": None}  # fmt: skip


def test_the_contention_report_prints_the_tables_and_the_verdicts(tmp_path: Path) -> None:
    machine = {"date": "2026-11-25T00:00:00+00:00", "cores": 2, "load_avg_min": 0.1, "load_avg_max": 0.3,
               "promote": "decision: a leads\nwinner: run a"}  # fmt: skip
    quiet = {
        **machine,
        "scenario": "quiet",
        "jobs": [_job("1x1", 8.0, 0), _job("4x1", 16.5, 40), _job("2x2", 16.0, 80)],
    }
    busy_jobs = [_job("1x1", 8.0, 0), _job("4x1", 9.0, 40, "true", "measurement 1: contended (x); measurement 2: "
                                                                   "contended (y)")]  # fmt: skip
    busy = {**machine, "scenario": "busy", "busy_loops": 2, "busy_start": 35.0, "busy_end": 75.0,
            "jobs": [{**j, "overlapped_busy_loops": j["start"] < 75 and j["end"] > 35} for j in busy_jobs]}  # fmt: skip
    search = {**machine, "scenario": "search", "seeds": [
        {"seed": 0, "jobs": [_job("4x1", 16.0, 0), _job("1x1", 8.0, 30)]},
        {"seed": 1, "jobs": [_job("1x1", 8.0, 0), _job("2x2", 15.0, 30), _job("4x4", 14.0, 60), _job("4x2", 1, 90)]},
    ]}  # fmt: skip
    for name, record in (("quiet", quiet), ("busy", busy), ("search", search)):
        (tmp_path / f"{name}.json").write_text(json.dumps(record))
    text = report(tmp_path)
    assert "| 2 | 4x1 | 16.50 [15.50, 17.50] |" in text and "winner: run a" in text
    # 1x1 ran before the loops; 4x1 overlapped them and was flagged
    assert "busy: 1 of 1 jobs that overlapped the loops were flagged (and re-measured); quiet jobs flagged: 0" in text
    assert "| 0 | 4x1, 1x1 | 4x1 | 1.000 | 60 (67%) | FAIL |" in text  # the pick is right, the cost too high
    assert "0 of 2 seeds within 5%" in text


def test_the_contention_search_needs_the_quiet_grid_and_gets_a_third_of_its_job_seconds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit, match=r"quiet\.json is missing: run `python -m benchmarks.contention quiet"):
        search_budget_s(tmp_path)
    quiet = {"jobs": [_job("1x1", 8.0, 0), _job("4x1", 16.5, 40), _job("4x1", 16.0, 80, race_of="r")]}
    (tmp_path / "quiet.json").write_text(json.dumps(quiet))
    assert search_budget_s(tmp_path) == 20.0  # two grid jobs of 30 s (the race replicate left out), a third
    # the search's command line as the harness gives it (no job runs): the budget, and KataGo's advice first
    assert kgbench_main(["--space", "-m", *BASE, *SEARCH, "hydra.sweeper.budget_s=20.000"]) == 0
    out = capsys.readouterr().out
    assert "budget: hydra.sweeper.budget_s=20 job-seconds" in out and "  9 configs" in out
    assert "start: numAnalysisThreads=4 numSearchThreadsPerAnalysisThread=1: the first trial" in out
