"""`python -m kgserve.batch` end to end: real subprocesses (the command, the simulated engine, kgserve), real
SIGKILLs, a kgserve restarted under the run. Behaviour only: no figure is timed."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
from pathlib import Path

import psutil

from kgserve.batch.inputs import PositionSpec, SgfSource, rows
from kgserve.batch.inputs import QuerySettings as Settings
from tests.conftest import kgserve_ready, start_kgserve
from tests.kgserve.batch.conftest import (
    answers,
    batch_env,
    journalled,
    run_batch,
    shape,
    start_batch,
    wait_until,
)
from tests.kgserve.http.conftest import write_config

SGF_ARGS = ("--visits", "20", "--positions", "every:4", "--include-ownership")


def _expected_ids(games: Path, spec: str = "every:4") -> list[str]:
    return [row.caller_id or "" for row in rows(SgfSource([games], PositionSpec.parse(spec)), Settings())]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_sgf_records_through_the_engine_pool(games: Path, sim_config: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    override = '{"rootNumSymmetriesToSample": 2}'
    done = run_batch(games, "-o", out, "--config", sim_config, *SGF_ARGS, "--override-settings", override)
    assert done.returncode == 0, done.stderr
    got = answers(out)
    assert [a["id"] for a in got] == _expected_ids(games) and len(got) > 10
    assert all(a["isDuringSearch"] is False and "ownership" in a and "error" not in a for a in got)
    handicap = {a["id"]: a for a in got}["handicap.sgf:0"]
    assert handicap["rootInfo"]["currentPlayer"] == "W"  # type: ignore[index]  # the handicap stones are there
    assert "skipped record broken.sgf" in done.stderr and "NN rows per visit" in done.stderr
    assert not (tmp_path / "out.jsonl.partial.jsonl").exists()


def test_jsonl_queries_keep_their_order_and_errors_end_in_a_non_zero_status(sim_config: Path, tmp_path: Path) -> None:
    queries = tmp_path / "q.jsonl"
    base = {"rules": "chinese", "komi": 7.5, "boardXSize": 9, "boardYSize": 9}
    lines = [
        {"id": "ok", "moves": [["B", "E5"]], **base},
        {"id": "illegal", "moves": [["B", "E5"], ["W", "E5"]], **base},
        {"id": "turns", "moves": [["B", "E5"], ["W", "C3"]], "analyzeTurns": [0, 2], **base},
    ]
    queries.write_text("\n".join([*(json.dumps(q) for q in lines[:2]), "not json", json.dumps(lines[2])]) + "\n")
    out = tmp_path / "out.jsonl"
    done = run_batch(queries, "-o", out, "--config", sim_config, "--visits", "10")
    assert done.returncode == 1, done.stderr
    got = answers(out)
    assert [a.get("id") for a in got] == ["ok", "illegal", None, "turns", "turns"]
    assert "error" in got[1] and got[1]["field"] == "moves"  # KataGo's own error line for the query
    assert "could not parse input line as json request" in str(got[2]["error"])
    assert [a["turnNumber"] for a in got[3:]] == [0, 2] and got[0]["isDuringSearch"] is False
    assert "errors" in done.stderr and "e.g. illegal" in done.stderr


def test_sigkill_at_any_moment_then_reruns_answer_every_id_exactly_once(
    games: Path, kgserve_url: tuple[str, Path], tmp_path: Path
) -> None:
    url, _ = kgserve_url
    reference = tmp_path / "reference.jsonl"
    assert run_batch(games, "-o", reference, "--url", url, *SGF_ARGS).returncode == 0
    out, log = tmp_path / "out.jsonl", tmp_path / "batch.log"
    args = (games, "-o", out, "--url", url, *SGF_ARGS, "--concurrency", "2")  # 2: slow enough to kill mid-run
    total = len(_expected_ids(games))
    for at in (0, 5, total // 3, (2 * total) // 3):  # before the journal exists, then with rows in it
        command = start_batch(*args, log=log)
        wait_until(lambda: journalled(out) >= at or command.poll() is not None, f"{at} rows journalled")  # noqa: B023
        command.send_signal(signal.SIGKILL)
        command.wait(30)
        assert not out.exists(), "a killed run wrote the output"
    journal = out.with_name(out.name + ".partial.jsonl")
    with journal.open("ab") as torn:  # a kill in the middle of a record
        torn.write(b'{"row": 3, "error": null, "lines": ["{\\"id')
    before = journalled(out)
    done = run_batch(*args)
    assert done.returncode == 0, done.stderr
    assert f"{total - before} of {total} rows to answer" in done.stderr  # only what was missing
    got, want = answers(out), answers(reference)
    assert [a["id"] for a in got] == _expected_ids(games)  # each id once, in input order
    assert [shape(a) for a in got] == [shape(a) for a in want]
    assert not journal.exists()


def test_kgserve_restarted_mid_run(games: Path, sim_config: Path, tmp_path: Path) -> None:
    first = start_kgserve(sim_config, batch_env(), log_dir=tmp_path)
    second = None
    try:
        url = first.wait_listening(120)
        first.wait_ready(120)
        out = tmp_path / "out.jsonl"
        command = start_batch(games, "-o", out, "--url", url, *SGF_ARGS, "--concurrency", "4",
                              log=tmp_path / "batch.log")  # fmt: skip
        wait_until(lambda: journalled(out) >= 8, "8 rows journalled")
        first.stop()  # in-flight queries are cut (grace 0.5 s); new ones are refused: the command waits
        second = start_kgserve(sim_config, batch_env(), "--port", url.rsplit(":", 1)[1], log_dir=tmp_path)
        second.wait_listening(120)
        assert command.wait(180) == 0, (tmp_path / "batch.log").read_text()
        assert "attempts tried again" in (tmp_path / "batch.log").read_text()  # the restart was met, and outlived
    finally:
        first.stop()
        if second is not None:
            second.stop()
    got = answers(out)
    assert [a["id"] for a in got] == _expected_ids(games)
    assert all("error" not in a and a["isDuringSearch"] is False for a in got)


def test_a_row_failing_for_good_is_an_error_line_naming_why(tmp_path: Path) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id":"a","moves":[]}\n{"id":"b","moves":[]}\n')
    out = tmp_path / "out.jsonl"
    url = f"http://127.0.0.1:{_free_port()}"
    done = run_batch(queries, "-o", out, "--url", url, "--max-attempts", "2", "--concurrency", "2")
    assert done.returncode == 1
    got = answers(out)
    assert [a["id"] for a in got] == ["a", "b"]
    assert all(str(a["error"]).startswith("batch: gave up after 2 attempts: connection") for a in got)
    assert "error x2: batch: gave up after 2 attempts" in done.stderr


def test_changed_input_or_settings_is_refused_never_mixed(games: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    unreachable = ("--url", f"http://127.0.0.1:{_free_port()}", "--max-attempts", "1000", "--concurrency", "2")
    command = start_batch(games, "-o", out, *unreachable, "--visits", "20", log=tmp_path / "batch.log")
    wait_until(lambda: out.with_name(out.name + ".partial.jsonl").exists(), "the journal")
    wait_until(lambda: b"\n" in out.with_name(out.name + ".partial.jsonl").read_bytes(), "its header")
    command.send_signal(signal.SIGKILL)
    command.wait(30)
    other = run_batch(games, "-o", out, *unreachable, "--visits", "30")
    assert other.returncode == 2 and "the settings changed" in other.stderr and "--restart" in other.stderr
    (games / "extra.sgf").write_text("(;SZ[9];B[ee])")
    more = run_batch(games, "-o", out, *unreachable, "--visits", "20")
    assert more.returncode == 2 and "the input changed" in more.stderr
    out.write_text("")
    out.with_name(out.name + ".partial.jsonl").unlink()
    finished = run_batch(games, "-o", out, *unreachable, "--visits", "20")
    assert finished.returncode == 2 and "exists (a finished run)" in finished.stderr


def _engines_of(command: subprocess.Popen[bytes]) -> list[psutil.Process]:
    wait_until(lambda: psutil.Process(command.pid).children(), "the engine started")
    return psutil.Process(command.pid).children(recursive=True)


def test_the_engine_pool_target_stopped_by_sigterm_and_sigkill_then_resumed(
    games: Path, sim_config: Path, tmp_path: Path
) -> None:
    out, log = tmp_path / "out.jsonl", tmp_path / "batch.log"
    args = (games, "-o", out, "--config", sim_config, *SGF_ARGS, "--concurrency", "2")
    total = len(_expected_ids(games))
    command = start_batch(*args, log=log)
    engines = _engines_of(command)
    wait_until(lambda: journalled(out) >= 5 or command.poll() is not None, "5 rows journalled")
    command.send_signal(signal.SIGTERM)
    assert command.wait(60) == 130 and "rerun the same command to resume" in log.read_text()
    wait_until(lambda: not any(e.is_running() and e.status() != psutil.STATUS_ZOMBIE for e in engines), "engines gone")
    command = start_batch(*args, log=log)
    engines = _engines_of(command)
    wait_until(lambda: journalled(out) >= total // 2 or command.poll() is not None, "half the rows journalled")
    command.send_signal(signal.SIGKILL)
    command.wait(30)
    # the engines die with the command (PR_SET_PDEATHSIG): nothing is left running
    wait_until(lambda: not any(e.is_running() and e.status() != psutil.STATUS_ZOMBIE for e in engines), "engines gone")
    done = run_batch(*args)
    assert done.returncode == 0, done.stderr
    assert [a["id"] for a in answers(out)] == _expected_ids(games)


def test_queries_grouped_into_requests_when_kgserve_allows_few_connections(games: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path, limits={"max_connections_per_client": 4})
    with kgserve_ready(config, batch_env(), log_dir=tmp_path) as (process, _):
        out = tmp_path / "out.jsonl"
        done = run_batch(games, "-o", out, "--url", process.url, *SGF_ARGS, "--concurrency", "8")
    assert done.returncode == 0, done.stderr
    assert "2 requests of up to 4" in done.stderr
    got = answers(out)
    assert [a["id"] for a in got] == _expected_ids(games) and all("error" not in a for a in got)
