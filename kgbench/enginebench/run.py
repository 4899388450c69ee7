"""mode=engine: run KataGo's own `katago benchmark` for one job and parse its table.

Contract with kgbench/sweep/job.py (the job owns MLflow; this module never imports mlflow)::

    from kgbench.enginebench.run import EngineBenchError, run_engine_benchmark

    try:
        bench = run_engine_benchmark(
            argv_prefix=settings.engine.argv_prefix(backend),   # e.g. [bin/trt/katago] or [python, -m, kgserve.sim]
            cfg_keys={"nnMaxBatchSize": 64, ...},               # the job's rendered katago.<key> values
            model=settings.engine.model_for(backend),
            visits=800, threads=[1, 2, 4, 8], positions=10,
            workdir=job_dir,                                    # benchmark.cfg, stdout/stderr logs go here
            home_data_dir=settings.engine.home_data_dir,        # TensorRT timing caches survive
            timeout_s=3600, startup_timeout_s=backend_settings.startup_timeout_s,
            env=None,                                           # e.g. KGSERVE_SIM_* for the simulated engine
        )
    except EngineBenchError as exc:       # fail the run: tag kgbench.failure_reason = str(exc),
        ...                               # attach exc.raw_text as artifact benchmark_output.txt
    for key, value in bench.metrics().items(): log_metric(key, value)          # incl. engine_start_s
    for key, value, step in bench.metric_series(): log_metric(key, value, step=step)  # step = threads
    # tags (named in kgbench.track.schema): bench.result.recommended_threads / recommended_source,
    # bench.trt_cache (hit|miss|None)
    log_artifact(bench.cfg_path)      # the GTP-style cfg the benchmark ran with (benchmark.cfg)

`katago benchmark` refuses an analysis cfg (it requires the GTP key `numSearchThreads`), so
`render_benchmark_cfg` drops analysis-only keys and sets `numSearchThreads`.
The parser lives in kgbench.enginebench.parse (pure; re-exported here).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kgbench.enginebench.parse import (
    BenchmarkParseError,
    BenchmarkResult,
    ThreadResult,
    parse_benchmark_output,
    trt_cache_status,
)
from kgserve.katago.cfg import ANALYSIS_ONLY_KEYS, cfg_text

__all__ = [
    "NOT_FOR_BENCHMARK",
    "BenchmarkParseError",
    "BenchmarkResult",
    "EngineBenchError",
    "EngineBenchRun",
    "ThreadResult",
    "benchmark_argv",
    "parse_benchmark_output",
    "render_benchmark_cfg",
    "run_engine_benchmark",
    "trt_cache_status",
]

# keys of a job's analysis cfg that the GTP-style benchmark does not get: analysis-only ones, and maxVisits
# (the benchmark takes -v)
NOT_FOR_BENCHMARK = ANALYSIS_ONLY_KEYS | {"maxVisits"}
# the engine has loaded the model: end of start-up (stdout of `katago benchmark`)
_STARTED_RE = re.compile(r"Loaded model |Testing using \d+ visits|numSearchThreads\s*=\s*\d+:")


class EngineBenchError(RuntimeError):
    """The benchmark failed (start-up, exit status, timeout or unparseable output).
    `.raw_text` is everything it printed (stdout, then stderr): attach it to the failed run."""

    def __init__(self, message: str, raw_text: str) -> None:
        super().__init__(message)
        self.raw_text = raw_text


def render_benchmark_cfg(
    cfg_keys: Mapping[str, object],
    *,
    threads: Sequence[int],
    home_data_dir: str | Path | None = None,
) -> str:
    """The GTP-style cfg `katago benchmark -config` needs: the job's keys minus analysis-only ones,
    `numSearchThreads` (given, else the largest tested thread count), `homeDataDir` when given."""
    keys = {k: v for k, v in cfg_keys.items() if k not in NOT_FOR_BENCHMARK and v is not None}
    if "numSearchThreads" not in keys:
        keys["numSearchThreads"] = max(threads) if threads else 1
    if home_data_dir is not None:
        keys["homeDataDir"] = str(home_data_dir)
    return cfg_text(keys, ["rendered by kgbench (mode=engine) for `katago benchmark`: a GTP-style cfg"])


def benchmark_argv(
    argv_prefix: Sequence[str], cfg: Path, model: Path, visits: int, threads: Sequence[int], positions: int
) -> list[str]:
    return [
        *argv_prefix,
        "benchmark",
        "-config",
        str(cfg),
        "-model",
        str(model),
        "-v",
        str(visits),
        "-t",
        ",".join(str(t) for t in threads),
        "-n",
        str(positions),
    ]


@dataclass
class EngineBenchRun:
    result: BenchmarkResult
    engine_start_s: float | None  # process start -> model loaded (first benchmark output)
    wall_s: float
    cfg_path: Path
    argv: list[str]
    stdout: str
    stderr: str
    trt_cache: str | None = None  # "hit" | "miss" | None (not TensorRT)

    def metrics(self) -> dict[str, float]:
        out = dict(self.result.headline_metrics())
        out["bench_wall_s"] = self.wall_s
        if self.engine_start_s is not None:
            out["engine_start_s"] = self.engine_start_s
        return out

    def metric_series(self) -> list[tuple[str, float, int]]:
        return self.result.metric_series()


class _Reader(threading.Thread):
    """Drains one pipe; for stdout, notes when the start-up marker first appears."""

    def __init__(self, stream: object, started_at: float, watch: bool) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.started_at = started_at
        self.watch = watch
        self.chunks: list[bytes] = []
        self.ready_s: float | None = None

    def run(self) -> None:
        fd = self.stream.fileno()  # type: ignore[attr-defined]
        tail = ""
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            self.chunks.append(chunk)
            if self.watch and self.ready_s is None:
                tail = (tail + chunk.decode("utf-8", "replace"))[-4096:]
                if _STARTED_RE.search(tail):
                    self.ready_s = time.monotonic() - self.started_at

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", "replace")


def _stderr_progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _supervise(
    proc: subprocess.Popen[bytes],
    out: _Reader,
    started: float,
    startup_timeout_s: float,
    timeout_s: float,
    progress: Callable[[str], None] | None,
    progress_every_s: float,
) -> str | None:
    """Wait for the benchmark to exit, killing it past its start-up or total timeout (the failure returned, else
    None) and noting progress every `progress_every_s` (a TensorRT cache miss is minutes of silence)."""
    next_note = progress_every_s
    while True:
        try:
            proc.wait(timeout=1.0)
            return None
        except subprocess.TimeoutExpired:
            elapsed = time.monotonic() - started
            failure: str | None = None
            if out.ready_s is None and elapsed > startup_timeout_s:
                failure = f"engine did not start within {startup_timeout_s:g} s (startup_timeout_s)"
            elif elapsed > timeout_s:
                failure = f"benchmark did not finish within {timeout_s:g} s"
            if failure:
                proc.kill()
                proc.wait()
                return failure
            if progress is not None and elapsed >= next_note:
                next_note += progress_every_s
                if out.ready_s is None:
                    progress(
                        f"engine benchmark: still starting after {elapsed:.0f} s "
                        "(TensorRT builds its engine on a cache miss: minutes for a big net)"
                    )
                else:
                    progress(f"engine benchmark: still running after {elapsed:.0f} s")


def run_engine_benchmark(
    *,
    argv_prefix: Sequence[str],
    cfg_keys: Mapping[str, object],
    model: str | Path,
    visits: int,
    threads: Sequence[int],
    positions: int,
    workdir: str | Path,
    home_data_dir: str | Path | None = None,
    timeout_s: float = 3600.0,
    startup_timeout_s: float = 1800.0,
    env: Mapping[str, str] | None = None,
    progress: Callable[[str], None] | None = _stderr_progress,
    progress_every_s: float = 30.0,
) -> EngineBenchRun:
    """Render benchmark.cfg into `workdir`, run `katago benchmark`, parse its output.
    Writes benchmark.stdout.log / benchmark.stderr.log next to the cfg. Raises EngineBenchError."""
    if not threads:
        raise ValueError("threads must name at least one thread count")
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    cfg_path = work / "benchmark.cfg"
    cfg_path.write_text(render_benchmark_cfg(cfg_keys, threads=threads, home_data_dir=home_data_dir))
    argv = benchmark_argv(argv_prefix, cfg_path, Path(model), visits, threads, positions)
    full_env = {**os.environ, **(env or {})}
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env
        )
    except OSError as exc:
        raise EngineBenchError(f"cannot start {argv[0]}: {exc}", "") from exc
    out = _Reader(proc.stdout, started, watch=True)
    err = _Reader(proc.stderr, started, watch=False)
    out.start()
    err.start()
    failure = _supervise(proc, out, started, startup_timeout_s, timeout_s, progress, progress_every_s)
    out.join(timeout=10)
    err.join(timeout=10)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    wall_s = time.monotonic() - started
    stdout, stderr = out.text(), err.text()
    (work / "benchmark.stdout.log").write_text(stdout)
    (work / "benchmark.stderr.log").write_text(stderr)
    raw = stdout + ("\n--- stderr ---\n" + stderr if stderr else "")
    if failure is None and proc.returncode != 0:
        last = next((ln for ln in reversed(stderr.splitlines()) if ln.strip()), "no stderr")
        failure = f"katago benchmark exited with status {proc.returncode}: {last.strip()}"
    if failure is not None:
        raise EngineBenchError(failure, raw)
    try:
        result = parse_benchmark_output(stdout)
    except BenchmarkParseError as exc:
        raise EngineBenchError(f"unparseable katago benchmark output: {exc}", raw) from exc
    return EngineBenchRun(
        result=result,
        engine_start_s=out.ready_s,
        wall_s=wall_s,
        cfg_path=cfg_path,
        argv=argv,
        stdout=stdout,
        stderr=stderr,
        trt_cache=trt_cache_status(stdout + stderr),
    )
