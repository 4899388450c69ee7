"""The sweep's cold-start statement, from its runs' tags and metrics: every case the report can meet."""

from __future__ import annotations

from mlflow.entities import Metric, Run, RunData, RunInfo, RunTag

from kgbench.track.coldstart import cold_start


def _run(tags: dict[str, str], metrics: dict[str, float]) -> Run:
    info = RunInfo("r", "0", "u", "FINISHED", 0, 1, "active")
    data = RunData(
        metrics=[Metric(k, v, 0, 0) for k, v in metrics.items()], tags=[RunTag(k, v) for k, v in tags.items()]
    )
    return Run(info, data)


COLD, LEDGER = {"kgbench.cold_start": "true"}, {"kgbench.cold_start": "true", "kgbench.positions": "sweep"}


def _sent(sent: int, repeats: int) -> dict[str, float]:
    return {"position_repeat_rate": repeats / sent, "positions_sent": sent, "position_repeats": repeats,
            "positions_distinct": 13400}  # fmt: skip


def test_unique_positions_over_cold_jobs() -> None:
    start = cold_start([_run(LEDGER, _sent(300, 0)), _run(LEDGER, _sent(200, 0))])
    cold, positions = start.lines()
    assert cold.startswith("- cold start: 2 of 2 jobs started their own kgserve and engines (kgserve restarted")
    assert "recorded no" not in cold
    assert positions.startswith("- positions: unique across the sweep: 500 sent by 2 jobs, none twice; each job")
    assert "positions.ledger" in positions and "repeats" not in positions


def test_repeats_are_counted_and_explained() -> None:
    start = cold_start([_run(LEDGER, _sent(13000, 0)), _run(LEDGER, _sent(1000, 600))])
    assert (start.sent, start.repeats, start.distinct) == (14000, 600, 13400)
    positions = start.lines()[1]
    assert "**600 of 14,000 were repeats**: the jobs used up the 13,400 distinct positions" in positions


def test_older_runs_and_engine_runs_are_named_not_counted() -> None:
    old = _run({}, {"position_repeat_rate": 0.0})  # a kgbench before the ledger and the cold-start tag
    engine = _run(COLD, {"visits_per_s": 900.0})  # mode=engine: no positions
    start = cold_start([_run(LEDGER, _sent(100, 0)), old, engine])
    cold, positions = start.lines()
    assert "2 of 3 jobs" in cold and "1 recorded no `kgbench.cold_start`" in cold
    assert "100 sent by 1 job, none twice" in positions and "1 job(s) drew their own positions" in positions
    assert "not checked across jobs" in cold_start([old]).lines()[1]
    assert "no job sent positions" in cold_start([engine]).lines()[1]
