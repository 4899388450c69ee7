"""Before any job starts or any MLflow run is made: can each job's engine start here? Its binary and model must exist
and the binary must start (`katago version`: a TensorRT build without TensorRT's libraries does not). A sweep
whose every job is blocked is refused with one message naming the fix; a sweep where only some are blocked runs the
others and says which it skips and why (`plan`). The same checks run again in each job
(kgbench.sweep.compose.spec), where a failure is a FAILED run: files can go away meanwhile, and jobs on other
nodes see other files.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from omegaconf import DictConfig

from kgbench.sweep.compose.engine_choice import apply_engine_choice
from kgbench.sweep.compose.spec import runtime_config_path, section
from kgserve.engine.client import is_simulated
from kgserve.katago.netfile import is_synthetic_model
from kgserve.preflight import startup_problems
from kgserve.settings import ConfigError, Settings, load_settings

__all__ = ["Blocked", "Plan", "job_problems", "plan"]

_MISSING_LIBRARY = re.compile(r"error while loading shared libraries: (\S+?):")
_TENSORRT_LIBRARY = re.compile(r"^lib(nvinfer|nvonnxparser)")
VERSION_TIMEOUT_S = 60.0


def _short_paths(text: str) -> str:
    """`text` with the working directory's prefix taken off its absolute paths (shorter lines)."""
    return text.replace(f"{Path.cwd()}/", "")


@lru_cache(maxsize=32)
def _start_problem(argv: tuple[str, ...], backend: str) -> str | None:
    """Why `argv version` does not run (a missing shared library, most often), or None."""
    try:
        done = subprocess.run([*argv, "version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None  # slow, not broken: the job's own start-up timeout decides
    except OSError as exc:
        return f"the engine binary {argv[0]} cannot be run: {exc.strerror or exc}"
    if done.returncode == 0:
        return None
    output = (done.stderr + done.stdout).strip()
    library = _MISSING_LIBRARY.search(output)
    if library:
        name = library.group(1)
        what = "TensorRT" if backend == "trt" or _TENSORRT_LIBRARY.match(name) else "a"
        return f"the engine binary {argv[0]} cannot start: {what} library is missing ({name})"
    last = output.splitlines()[-1] if output else "no output"
    return f"`{argv[0]} version` exited {done.returncode}: {last[:200]}"


def _engine_problems(settings: Settings, backend: str) -> list[str]:
    engine = settings.engine
    # the job writes its own analysis cfg, and measures a synthetic net (tagged) rather than refuse it: check the
    # rest with the runtime config standing in for the cfg
    synthetic = engine.throughput_test or is_synthetic_model(engine.model_for(backend))
    assert settings.source is not None
    checked = engine.model_copy(update={"cfg": settings.source, "throughput_test": synthetic})
    problems = startup_problems(settings.model_copy(update={"engine": checked}))
    if problems or is_simulated(backend):
        return problems
    started = _start_problem(tuple(engine.argv_prefix(backend)), backend)
    return [started] if started else []


def job_problems(cfg: DictConfig) -> list[str]:
    """Why this job's engine cannot start here (empty: it can), each in one sentence naming the path and key."""
    backend = str(cfg.get("backend", ""))
    try:
        settings = load_settings(runtime_config_path(cfg)).with_overrides(backend=backend)
        settings = apply_engine_choice(settings, section(cfg, "engine"))
    except ConfigError as exc:
        return [str(exc)]
    return _engine_problems(settings, backend)


def _fixes(blocked: Sequence[Blocked]) -> list[str]:
    text = " ".join(problem for group in blocked for problem in group.problems)
    fixes = []
    if "TensorRT library" in text:
        fixes.append("run it inside the TensorRT container (runtime/enroot_start.pbs), which has TensorRT's libraries")
    if "does not exist" in text or "not on PATH" in text:
        if any(group.backend in ("cuda", "trt") for group in blocked):
            fixes.append("runtime/fetch_katago.sh downloads the pinned KataGo builds and network (docs/runbook.md)")
        fixes.append("engine.binary=PATH engine.model=PATH: your own KataGo and network (README: On a real KataGo)")
    fixes.append("backend=sim: the simulated engine, no KataGo needed")
    return fixes


@dataclass(frozen=True)
class Blocked:
    """The jobs of one backend that cannot start here, for the same reasons."""

    backend: str
    jobs: tuple[str, ...]  # their override lines
    problems: tuple[str, ...]

    def lines(self) -> list[str]:
        count = f"{len(self.jobs)} job{'s' if len(self.jobs) != 1 else ''}"
        return [f"  backend={self.backend} ({count}):", *(f"    {_short_paths(p)}" for p in self.problems)]


@dataclass(frozen=True)
class Plan:
    runnable: tuple[int, ...]  # the jobs that can start, by their index in the sweep
    blocked: tuple[Blocked, ...] = field(default=())

    @property
    def skipped(self) -> tuple[tuple[str, str], ...]:
        """(job, why) for every job left out."""
        return tuple((job, "; ".join(group.problems)) for group in self.blocked for job in group.jobs)

    def refusal(self) -> str | None:
        """The one message of a sweep with nothing to run; None when some job can start."""
        if self.runnable or not self.blocked:
            return None
        lines = ["nothing to run: no job can start here, so none was started and nothing was recorded in MLflow"]
        lines += [line for group in self.blocked for line in group.lines()]
        lines.append("fix, one of:")
        lines += [f"  {fix}" for fix in _fixes(self.blocked)]
        return "\n".join(lines)

    def skip_lines(self) -> list[str]:
        """What a sweep that runs some jobs says about the others."""
        if not self.runnable or not self.blocked:
            return []
        skipped = sum(len(group.jobs) for group in self.blocked)
        total = skipped + len(self.runnable)
        lines = [f"skipping {skipped} of {total} jobs, which cannot start here (the other {len(self.runnable)} run):"]
        return lines + [line for group in self.blocked for line in group.lines()]


def plan(jobs: Sequence[tuple[str, DictConfig]]) -> Plan:
    """`jobs`: (override line, composed config) in the sweep's order."""
    runnable: list[int] = []
    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for index, (label, cfg) in enumerate(jobs):
        problems = tuple(job_problems(cfg))
        if not problems:
            runnable.append(index)
        else:
            groups.setdefault((str(cfg.get("backend", "")), problems), []).append(label)
    blocked = tuple(Blocked(backend, tuple(labels), problems) for (backend, problems), labels in groups.items())
    return Plan(tuple(runnable), blocked)
