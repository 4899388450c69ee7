"""Engine wrapper against a scripted fake engine: exact bytes, routing, terminate, crashes, close."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from kgserve.engine.engine import Engine, EngineSpec
from kgserve.engine.errors import AbortTimeout, EngineDied, EngineStartupError
from kgserve.engine.procutil import pid_alive
from tests.helpers.engine_checks import make_query

from .conftest import REFERENCE

Spec = Callable[..., EngineSpec]
SAMPLES = sorted((REFERENCE / "samples" / "outputs").glob("*.jsonl"))


async def started(spec: EngineSpec) -> Engine:
    engine = Engine(spec)
    await engine.start()
    return engine


def replay_cases() -> list[tuple[str, dict[str, object], Path]]:
    cases: list[tuple[str, dict[str, object], Path]] = []
    for output in SAMPLES:
        body = json.loads((REFERENCE / "samples" / "inputs" / f"{output.stem}.json").read_text())
        cases.append((output.stem, body, output))
    for name in ("multi_turn", "during_search"):
        line = (REFERENCE / "protocol" / f"{name}.in.jsonl").read_text().splitlines()[0]
        cases.append((name, json.loads(line), REFERENCE / "protocol" / f"{name}.out.jsonl"))
    return cases


async def test_replayed_reference_outputs_come_back_byte_for_byte(fake_spec: Spec) -> None:
    engine = await started(fake_spec())
    try:
        cases = replay_cases()
        assert len(cases) >= 6
        streams = [engine.submit(make_query({**body, "replay": str(path)})) for _, body, path in cases]
        for (name, _, path), stream in zip(cases, streams, strict=True):
            lines = await asyncio.wait_for(stream.collect(), 30)
            assert b"".join(line + b"\n" for line in lines) == path.read_bytes(), name
            assert stream.internal_id.encode() not in b"".join(lines)
        assert engine.outstanding_visits == 0
        assert engine.version == "1.17.2-fake"
        assert engine.model == "model.bin.gz"
    finally:
        await engine.close(5)


async def test_caller_ids_that_need_escaping_are_restored(fake_spec: Spec) -> None:
    engine = await started(fake_spec())
    try:
        for caller_id in ['a"b', "back\\slash", "ünï ✓", "kgq1", ""]:
            stream = engine.submit(make_query({"id": caller_id, "moves": [], "maxVisits": 1}))
            (line,) = await asyncio.wait_for(stream.collect(), 10)
            assert json.loads(line)["id"] == caller_id
    finally:
        await engine.close(5)


async def test_a_one_megabyte_line_passes(fake_spec: Spec) -> None:
    engine = await started(fake_spec())
    try:
        stream = engine.submit(make_query({"id": "big", "moves": [], "fakePad": 1_500_000}))
        (line,) = await asyncio.wait_for(stream.collect(), 30)
        assert len(line) > 1_500_000
        assert json.loads(line)["id"] == "big"
    finally:
        await engine.close(5)


async def test_same_caller_id_many_concurrent_queries_are_kept_apart(fake_spec: Spec) -> None:
    engine = await started(fake_spec())
    try:
        turn_sets = [sorted({(i * 7 + k) % 13 for k in range(1 + i % 4)}) for i in range(60)]
        streams = [
            engine.submit(make_query({"id": "dup", "moves": [], "analyzeTurns": turns, "fakeDelay": (i % 5) * 0.01}))
            for i, turns in enumerate(turn_sets)
        ]
        results = await asyncio.wait_for(asyncio.gather(*(s.collect() for s in streams)), 60)
        for turns, lines in zip(turn_sets, results, strict=True):
            docs = [json.loads(line) for line in lines]
            assert {doc["id"] for doc in docs} == {"dup"}
            assert sorted(doc["turnNumber"] for doc in docs) == turns
        assert engine.outstanding_visits == 0 and engine.pending == 0
    finally:
        await engine.close(5)


async def test_error_line_ends_the_query(fake_spec: Spec) -> None:
    engine = await started(fake_spec())
    try:
        stream = engine.submit(make_query({"id": "e", "moves": [], "analyzeTurns": [0, 1], "fakeError": "bad"}))
        lines = await asyncio.wait_for(stream.collect(), 10)
        assert lines == [b'{"error":"bad","field":"fakeError","id":"e"}']
    finally:
        await engine.close(5)


async def test_outstanding_visits_follow_turns(fake_spec: Spec) -> None:
    engine = await started(fake_spec(default_visits=40))
    try:
        slow = engine.submit(
            make_query({"id": "s", "moves": [], "maxVisits": 100, "analyzeTurns": [0, 1, 2], "fakeDelay": 0.3})
        )
        plain = engine.submit(make_query({"id": "p", "moves": [], "fakeDelay": 0.3}))
        assert engine.outstanding_visits == 340
        first = await asyncio.wait_for(anext(slow), 10)
        assert json.loads(first)["turnNumber"] == 0
        assert engine.outstanding_visits in (200, 240)
        await asyncio.wait_for(asyncio.gather(slow.collect(), plain.collect()), 10)
        assert engine.outstanding_visits == 0
    finally:
        await engine.close(5)


async def test_abort_yields_the_engines_final_lines(fake_spec: Spec) -> None:
    engine = await started(fake_spec())
    try:
        stream = engine.submit(make_query({"id": "long", "moves": [], "analyzeTurns": [3, 4], "fakeDelay": 60}))
        await asyncio.sleep(0.2)
        engine.abort(stream)
        lines = await asyncio.wait_for(stream.collect(), 10)
        assert [json.loads(line)["terminated"] for line in lines] == [True, True]
        assert engine.outstanding_visits == 0
    finally:
        await engine.close(5)


async def test_abort_without_answer_times_out(fake_spec: Spec) -> None:
    engine = await started(fake_spec(abort_timeout_s=0.5))
    try:
        stream = engine.submit(make_query({"id": "x", "moves": [], "fakeDelay": 60, "fakeIgnoreTerminate": True}))
        engine.abort(stream)
        with pytest.raises(AbortTimeout):
            await asyncio.wait_for(stream.collect(), 10)
        assert engine.pending == 0 and engine.outstanding_visits == 0
    finally:
        await engine.close(0.5)


async def test_sigkill_fails_pending_streams_promptly(fake_spec: Spec) -> None:
    engine = await started(fake_spec())
    streams = [engine.submit(make_query({"id": f"q{i}", "moves": [], "fakeDelay": 60})) for i in range(5)]
    assert engine.pid is not None
    loop = asyncio.get_running_loop()
    began = loop.time()
    os.kill(engine.pid, signal.SIGKILL)
    for stream in streams:
        with pytest.raises(EngineDied) as info:
            await asyncio.wait_for(stream.collect(), 10)
        assert info.value.exit_code == -signal.SIGKILL
    assert loop.time() - began < 3
    assert await engine.wait() == -signal.SIGKILL
    with pytest.raises(EngineDied):
        engine.submit(make_query({"id": "late", "moves": []}))


async def test_engine_crash_mid_stream_delivers_earlier_lines_then_dies(fake_spec: Spec) -> None:
    engine = await started(fake_spec())
    stream = engine.submit(make_query({"id": "a", "moves": [], "analyzeTurns": [0, 1], "fakeDelay": 0.0}))
    slow = engine.submit(make_query({"id": "b", "moves": [], "fakeDelay": 60}))
    await asyncio.wait_for(stream.collect(), 10)
    engine.submit(make_query({"id": "boom", "moves": [], "fakeCrash": 3}))
    with pytest.raises(EngineDied) as info:
        await asyncio.wait_for(slow.collect(), 10)
    assert info.value.exit_code == 3
    assert "crashing as asked" in info.value.stderr_tail[-1]


async def test_missing_model_is_a_startup_error_with_stderr(fake_spec: Spec, tmp_path: Path) -> None:
    engine = Engine(fake_spec(model=tmp_path / "nope.bin.gz"))
    with pytest.raises(EngineStartupError) as info:
        await asyncio.wait_for(engine.start(), 30)
    assert info.value.exit_code == 134
    assert any("Error loading or parsing model file" in line for line in info.value.stderr_tail)
    assert "status 134" in str(info.value)


async def test_startup_timeout_kills_the_engine(fake_spec: Spec) -> None:
    engine = Engine(fake_spec(env={"FAKE_NEVER_READY": "1"}, startup_timeout_s=1.0))
    with pytest.raises(EngineStartupError, match="not ready after 1s"):
        await asyncio.wait_for(engine.start(), 30)
    assert engine.pid is not None and not pid_alive(engine.pid)


async def test_missing_binary_is_a_startup_error(fake_spec: Spec, tmp_path: Path) -> None:
    engine = Engine(fake_spec(argv=[str(tmp_path / "katago"), "analysis"]))
    with pytest.raises(EngineStartupError, match="cannot run"):
        await engine.start()


async def test_close_settles_everything(fake_spec: Spec) -> None:
    engine = await started(fake_spec())
    normal = [engine.submit(make_query({"id": f"n{i}", "moves": [], "fakeDelay": 60})) for i in range(3)]
    stuck = engine.submit(make_query({"id": "s", "moves": [], "fakeDelay": 60, "fakeIgnoreTerminate": True}))
    pid = engine.pid
    assert pid is not None
    code = await asyncio.wait_for(engine.close(1.0), 30)
    assert code is not None and not pid_alive(pid)
    for stream in normal:  # terminate_all: KataGo's partial final lines
        lines = await asyncio.wait_for(stream.collect(), 1)
        assert json.loads(lines[-1])["terminated"] is True
    with pytest.raises(EngineDied):
        await asyncio.wait_for(stuck.collect(), 1)
    assert engine.pending == 0 and engine.outstanding_visits == 0


async def test_stderr_sink_gets_every_stderr_line_instead_of_the_log(
    fake_spec: Spec, caplog: pytest.LogCaptureFixture
) -> None:
    lines: list[tuple[str, str]] = []
    caplog.set_level("INFO", logger="kgserve.engine")
    engine = await started(fake_spec(label="engine[3]", stderr_sink=lambda label, line: lines.append((label, line))))
    await engine.close(5)
    assert ("engine[3]", "2026-11-22 05:27:07+0000: KataGo v1.17.2 (fake)") in lines
    assert any("Started, ready to begin handling requests" in line for _, line in lines)
    assert list(engine.stderr_tail) == [line for _, line in lines][-len(engine.stderr_tail) :]
    assert not [r for r in caplog.records if r.getMessage().startswith("engine[3] stderr: ")]  # the sink took them


def test_a_turn_is_claimed_for_a_terminate_once() -> None:
    from kgserve.engine.stream import QueryStream

    stream = QueryStream(None, make_query({"id": "q", "moves": [], "analyzeTurns": [0, 2, 4]}), "kgq1", 10)  # type: ignore[arg-type]
    assert stream.claim_turns(frozenset({2, 3, 9})) == [2]  # only turns it analyses
    assert stream.claim_turns(frozenset(range(100))) == [0, 4]  # each once
    assert stream.claim_turns(frozenset({0, 2, 4})) == []
