"""The sweep's position ledger: disjoint reservations (across processes and threads), one order for every job,
repeats only once every position was handed out, clear errors on a foreign file."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import threading
from pathlib import Path

import pytest

from kgbench.load.ledger import LEDGER_NAME, LedgerError, PositionLedger
from kgbench.load.traffic import QuerySource


def _small_games(tmp_path: Path) -> Path:
    """One 9x9 game of two moves: 3 prefixes x 8 symmetries x 2 komi = 48 positions."""
    games = tmp_path / "games"
    games.mkdir()
    query = {"id": "g", "moves": [["B", "C3"], ["W", "G7"]], "komi": 7.0, "boardXSize": 9, "boardYSize": 9}
    (games / "g.json").write_text(json.dumps(query))
    return games


def _job_source(games: Path, ledger: Path, seed: int, job: str, block: int) -> QuerySource:
    own = QuerySource.from_dirs([games], seed=seed, komi_offsets=(0.0, 0.5))
    handle = PositionLedger(ledger, seed=seed, positions=own.size, job=job)
    return QuerySource(own.games, seed=handle.seed, komi_offsets=(0.0, 0.5), offsets=handle.offsets(block))


def test_reservations_follow_each_other_and_the_first_seed_wins(tmp_path: Path) -> None:
    path = tmp_path / LEDGER_NAME
    first = PositionLedger(path, seed=3, positions=100, job="0: a=1")
    second = PositionLedger(path, seed=99, positions=100, job="1: a=2")
    assert first.seed == second.seed == 3
    assert first.reserve(10) == range(0, 10)
    assert second.reserve(5) == range(10, 15)
    assert first.reserve(200) == range(15, 215)  # past the positions: later passes, not refused
    assert (first.reserved, second.reserved) == (210, 5)
    lines = path.read_text().splitlines()
    assert lines[0] == "kgbench position ledger v1: seed=3 positions=100"
    assert [line.split()[:2] for line in lines[1:]] == [["0", "10"], ["10", "5"], ["15", "200"]]
    assert lines[2].endswith("job=1: a=2")
    with pytest.raises(ValueError, match="count must be >= 1"):
        first.reserve(0)


def test_a_ledger_of_other_positions_or_no_ledger_at_all_is_refused(tmp_path: Path) -> None:
    path = tmp_path / LEDGER_NAME
    PositionLedger(path, seed=0, positions=100, job="0")
    with pytest.raises(LedgerError, match="shares out 100 positions, this job has 101"):
        PositionLedger(path, seed=0, positions=101, job="1")
    other = tmp_path / "notes.txt"
    other.write_text("shopping list\n")
    with pytest.raises(LedgerError, match="is not a kgbench position ledger"):
        PositionLedger(other, seed=0, positions=100, job="0")
    assert other.read_text() == "shopping list\n"  # nothing appended to a file that is not a ledger


def _reserve_many(path: str, job: int, rounds: int, start: threading.Barrier | None, out: list[range]) -> None:
    ledger = PositionLedger(Path(path), seed=job, positions=1000, job=str(job))
    if start is not None:
        start.wait()
    out.extend(ledger.reserve(1 + (job + i) % 7) for i in range(rounds))


def _process_job(path: str, job: int, rounds: int, start: object, queue: object) -> None:
    got: list[range] = []
    start.wait()  # type: ignore[attr-defined]  # all processes reserve at once
    _reserve_many(path, job, rounds, None, got)
    queue.put([(r.start, r.stop) for r in got])  # type: ignore[attr-defined]


def _assert_tiles(ranges: list[range], lines: list[str]) -> None:
    """The reservations are disjoint and leave no gap: together they are 0..total."""
    ordered = sorted(ranges, key=lambda r: r.start)
    assert ordered[0].start == 0
    for before, after in itertools.pairwise(ordered):
        assert before.stop == after.start
    assert len(lines) == 1 + len(ranges)  # the header, then one line per reservation


def test_concurrent_reservations_from_several_processes_never_overlap(tmp_path: Path) -> None:
    path = str(tmp_path / LEDGER_NAME)
    ctx = multiprocessing.get_context("spawn")  # fresh interpreters: separate processes, as parallel jobs are
    start, queue = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_process_job, args=(path, job, 40, start, queue)) for job in range(4)]
    for proc in procs:
        proc.start()
    try:
        results = [queue.get(timeout=120) for _ in procs]
    finally:
        for proc in procs:
            proc.join(timeout=60)
    assert all(proc.exitcode == 0 for proc in procs)
    ranges = [range(a, b) for result in results for a, b in result]
    assert len(ranges) == 160
    _assert_tiles(ranges, Path(path).read_text().splitlines())


def test_concurrent_reservations_from_threads_of_one_process_never_overlap(tmp_path: Path) -> None:
    path = str(tmp_path / LEDGER_NAME)
    start = threading.Barrier(4)
    outs: list[list[range]] = [[] for _ in range(4)]
    threads = [threading.Thread(target=_reserve_many, args=(path, j, 40, start, outs[j])) for j in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    _assert_tiles([r for out in outs for r in out], Path(path).read_text().splitlines())


def test_jobs_share_one_order_without_overlap_then_repeats_are_counted(tmp_path: Path) -> None:
    games, ledger = _small_games(tmp_path), tmp_path / LEDGER_NAME
    a = _job_source(games, ledger, seed=3, job="0", block=5)
    b = _job_source(games, ledger, seed=8, job="1", block=5)  # its own seed is ignored: the sweep's order is 3's
    assert a.size == b.size == 48
    sent_a = [a.next()[0] for _ in range(7)]  # two blocks: 0-4, 5-9
    sent_b = [b.next()[0] for _ in range(30)]  # six blocks: 10-39
    sent_a += [a.next()[0] for _ in range(11)]  # 7-9, then 40-44, 45-47 of the next block
    assert not set(sent_a) & set(sent_b)
    single = QuerySource.from_dirs([games], seed=3, komi_offsets=(0.0, 0.5))
    order = [single.next()[0] for _ in range(48)]  # seed 3's first pass: every position once
    assert sorted(sent_a + sent_b) == sorted(order)
    assert (a.repeats, b.repeats) == (0, 0)
    again = [a.next()[0] for _ in range(2)]  # offsets 48, 49: the second pass, handed out again, and counted
    assert set(again) <= set(sent_a + sent_b)
    assert (a.sent, a.repeats) == (20, 2) and a.repeat_rate() == pytest.approx(2 / 20)
    assert sent_a[:7] == order[:7] and sent_b == order[10:40]  # the order of seed 3, offsets as reserved
