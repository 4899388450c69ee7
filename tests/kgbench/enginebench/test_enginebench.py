"""mode=engine: the `katago benchmark` parser on the real recorded output, cfg rendering, and a real
subprocess run against a stand-in engine that replays the recording."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from kgbench.enginebench.run import (
    BenchmarkParseError,
    EngineBenchError,
    EngineBenchRun,
    parse_benchmark_output,
    render_benchmark_cfg,
    run_engine_benchmark,
    trt_cache_status,
)
from kgserve.katago.cfg import parse_cfg_text
from tests.conftest import REFERENCE, REPO, SIM_MODEL

RECORDED = REFERENCE / "benchmark" / "benchmark.stdout.log"


def test_parser_on_real_output() -> None:
    result = parse_benchmark_output(RECORDED.read_text())
    assert result.visits_per_s() == {1: 87.65, 2: 159.23, 4: 206.06, 8: 213.33}
    assert result.recommended_threads == 4
    assert result.recommended_source == "katago"
    rows = result.by_threads()
    assert rows[4].nn_evals_per_s == 196.67
    assert rows[4].nn_batches_per_s == 111.40
    assert rows[8].avg_batch_size == 1.98
    assert [rows[t].elo_diff for t in (1, 2, 4, 8)] == [0.0, 210.0, 292.0, 280.0]
    assert result.visits == 200
    assert result.headline().threads == 4
    series = result.metric_series()
    assert ("bench_visits_per_s", 213.33, 8) in series
    assert result.recommended_threads == 4


def test_parser_progress_only_raises_with_raw_text() -> None:
    text = "numSearchThreads =  1: 0 / 4 positions, visits/s = -nan (0.0 secs)\rnumSearchThreads =  1: 1 / 4"
    with pytest.raises(BenchmarkParseError) as info:
        parse_benchmark_output(text)
    assert info.value.raw_text == text


def test_parser_without_recommendation_falls_back_to_elo() -> None:
    text = RECORDED.read_text().replace(" (recommended)", "")
    result = parse_benchmark_output(text)
    assert result.recommended_threads == 4
    assert result.recommended_source == "elo"


def test_render_benchmark_cfg_is_gtp_style() -> None:
    analysis = parse_cfg_text((REFERENCE / "analysis.cfg").read_text())
    assert analysis["numAnalysisThreads"] == "4"
    text = render_benchmark_cfg(analysis, threads=[1, 2, 8], home_data_dir="/data/home")
    keys = parse_cfg_text(text)
    assert keys["numSearchThreads"] == "8"
    assert keys["homeDataDir"] == "/data/home"
    assert keys["nnMaxBatchSize"] == "16"
    for key in ("numAnalysisThreads", "numSearchThreadsPerAnalysisThread", "maxVisits"):
        assert key not in keys
    assert parse_cfg_text(render_benchmark_cfg({"numSearchThreads": 3, "x": True}, threads=[8])) == {
        "numSearchThreads": "3",
        "x": "true",
    }


def test_trt_cache_status() -> None:
    assert trt_cache_status("TensorRT backend thread 0: Using existing timing cache at /h/x") == "hit"
    assert trt_cache_status("TensorRT backend thread 0: Creating new timing cache") == "miss"
    assert trt_cache_status(RECORDED.read_text()) is None


FAKE = textwrap.dedent(
    """
    import sys, time
    args = sys.argv[1:]
    assert args[0] == "benchmark", args
    opts = dict(zip(args[1::2], args[2::2]))
    cfg = open(opts["-config"]).read()
    if "numSearchThreads" not in cfg:
        sys.stderr.write("Could not find key 'numSearchThreads'\\n"); sys.exit(134)
    mode = open(opts["-model"]).read().strip()
    if mode == "crash":
        sys.stderr.write("terminate called after throwing an instance of 'IOError'\\n"); sys.exit(134)
    time.sleep(0.3)
    if mode == "garbage":
        print("something unexpected"); sys.exit(0)
    sys.stdout.write(open(mode).read()); sys.stdout.flush()
    """
)


def _run(tmp_path: Path, mode: str) -> EngineBenchRun:
    script = tmp_path / "fake_katago.py"
    script.write_text(FAKE)
    model = tmp_path / "model.txt"
    model.write_text(mode)
    return run_engine_benchmark(
        argv_prefix=[sys.executable, str(script)],
        cfg_keys={"numAnalysisThreads": 4, "nnMaxBatchSize": 16},
        model=model,
        visits=200,
        threads=[1, 2, 4, 8],
        positions=4,
        workdir=tmp_path / "job",
        timeout_s=60,
        progress=None,
    )


def test_run_engine_benchmark_real_subprocess(tmp_path: Path) -> None:
    bench = _run(tmp_path, str(RECORDED))
    assert bench.result.recommended_threads == 4
    metrics = bench.metrics()
    assert metrics["visits_per_s"] == 206.06
    assert metrics["recommended_threads"] == 4
    assert 0.2 < metrics["engine_start_s"] < 30
    assert bench.argv[-6:] == ["-v", "200", "-t", "1,2,4,8", "-n", "4"]
    assert (tmp_path / "job" / "benchmark.stdout.log").read_text() == RECORDED.read_text()
    assert "numAnalysisThreads" not in (tmp_path / "job" / "benchmark.cfg").read_text()


@pytest.mark.parametrize(("mode", "message"), [("crash", "status 134"), ("garbage", "unparseable")])
def test_run_engine_benchmark_failures_carry_raw_text(tmp_path: Path, mode: str, message: str) -> None:
    with pytest.raises(EngineBenchError) as info:
        _run(tmp_path, mode)
    assert message in str(info.value)
    expected = "IOError" if mode == "crash" else "something unexpected"
    assert expected in info.value.raw_text


def test_run_engine_benchmark_against_the_simulated_engine(tmp_path: Path) -> None:
    """The real contract with kgserve.sim: same argv, same output format, parsed the same way."""
    model = SIM_MODEL
    bench = run_engine_benchmark(
        argv_prefix=[sys.executable, "-m", "kgserve.sim"],
        cfg_keys={"numAnalysisThreads": 8, "numSearchThreadsPerAnalysisThread": 1, "nnMaxBatchSize": 16},
        model=model,
        visits=50,
        threads=[1, 2, 4],
        positions=2,
        workdir=tmp_path,
        timeout_s=120,
        env={"KGSERVE_SIM_SPEED": "50", "KGSERVE_SIM_DEVICE": "private", "PYTHONPATH": str(REPO)},
        progress=None,
    )
    assert sorted(bench.result.visits_per_s()) == [1, 2, 4]
    assert bench.result.recommended_threads in (1, 2, 4)
    assert bench.result.recommended_source == "katago"
    assert bench.engine_start_s is not None and bench.engine_start_s < bench.wall_s
    assert "SIMULATED" in bench.stdout + bench.stderr


def test_an_engine_that_never_starts_is_killed_with_progress_noted(tmp_path: Path) -> None:
    """The supervision loop: notes while the engine says nothing, then the start-up timeout kills it."""
    script = tmp_path / "silent_katago.py"
    pid_file = tmp_path / "pid"
    script.write_text(f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n")
    notes: list[str] = []
    with pytest.raises(EngineBenchError) as info:
        run_engine_benchmark(
            argv_prefix=[sys.executable, str(script)],
            cfg_keys={"nnMaxBatchSize": 16},
            model=tmp_path / "model.bin.gz",
            visits=10,
            threads=[1],
            positions=1,
            workdir=tmp_path / "job",
            timeout_s=60,
            startup_timeout_s=2,
            progress=notes.append,
            progress_every_s=1,
        )
    assert "engine did not start within 2 s (startup_timeout_s)" in str(info.value)
    assert notes and all(note.startswith("engine benchmark: still starting after") for note in notes)
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # killed and reaped: no process is left with its pid
        os.kill(pid, 0)
