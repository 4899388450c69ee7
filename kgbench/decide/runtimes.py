"""Which runs promote may choose among: only those of the runtime it writes (kgbench.track.runtime_id).

In place, the runtime is the config promote edits (`--config`, default runtime/config.yaml): a run fits it when it
was composed from that config, ran a backend of the family the config serves (promote may switch cuda and trt, never
a GPU build and the CPU build or the sim), its model and the config's own KataGo (not one named on the command line).
A scratch runtime (`--runtime-dir`, or by default for a simulated or a synthetic net's sweep) is made from the config
with the runs' own engine, so any one runtime of that config fits. Among the runs that fit, those of one machine are
compared: this machine's when it measured some, else the only one. Nothing fits: `CrossRuntime`, naming both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mlflow.entities import Run

from kgbench.decide.nets import CHOICE_NOTE
from kgbench.track.runtime_id import RuntimeId, backend_family, runtime_of
from kgbench.track.schema import SIMULATED, SYNTHETIC_NET
from kgserve.settings import DEFAULT_CONFIG_PATH, ConfigError, Settings, load_settings

__all__ = [
    "CrossRuntime",
    "RuntimeChoice",
    "choose_runs",
    "misfit",
    "promote_command",
    "runtime_dir_hint",
    "shown_path",
]

_LISTED = 3  # runtimes named in a refusal


class CrossRuntime(Exception):
    """The runs are not of the runtime promote would write; the message names both and what to do."""


def shown_path(path: Path | str) -> str:
    """The path relative to the working directory when it is below it."""
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def runtime_dir_hint(backend: str) -> str:
    """Where promote's refusal suggests a runtime of the runs' own (git-ignored: runtime/<backend>/)."""
    return f"runtime/{backend}"


def _serves(settings: Settings) -> str:
    engine = settings.engine
    return (
        f"{shown_path(settings.source or '?')} serves {engine.backend} ({backend_family(engine.backend)}) with "
        f"{engine.model_for(engine.backend).name}"
    )


def misfit(runtime: RuntimeId, settings: Settings) -> str | None:
    """Why a run's figures do not belong to the runtime `settings` serves, promoted in place; None when they do."""
    if runtime.config and settings.source is not None and Path(runtime.config) != settings.source:
        return f"composed from another runtime config ({shown_path(runtime.config)})"
    served = settings.engine.backend
    if runtime.family != backend_family(served):
        return f"{runtime.backend} ({runtime.family}), not a {backend_family(served)} backend"
    if runtime.engine_binary:
        return f"ran the KataGo named on the command line ({runtime.engine_binary})"
    backend = runtime.backend if runtime.backend in settings.engine.backends else served
    model = settings.engine.model_for(backend).name
    if runtime.engine_model or (runtime.model and runtime.model != model):
        return f"ran the model {runtime.model or runtime.engine_model}, not {model}"
    return None


@dataclass(frozen=True)
class RuntimeChoice:
    runs: list[Run]  # the runs of the runtime promote writes
    scratch: str | None  # why promote writes a scratch runtime; None: the config in place
    left_out: tuple[tuple[RuntimeId, int], ...] = ()  # the sweep's runs of other runtimes, counted

    def left_out_line(self) -> str:
        if not self.left_out:
            return ""
        count = sum(n for _, n in self.left_out)
        named = "; ".join(f"{n} {rt.describe()}" for rt, n in self.left_out[:_LISTED])
        chosen = {runtime_of(r.data.tags, r.data.params).model for r in self.runs}
        note = f" ({CHOICE_NOTE})" if {rt.model for rt, _ in self.left_out} - chosen else ""
        return f"left out {count} run{'s' if count != 1 else ''} of another runtime: {named}{note}"


def _flagged(run: Run, tag: str) -> bool:
    return run.data.tags.get(tag, "false") == "true"


def _group(runs: Sequence[Run], ids: dict[str, RuntimeId], here: str, refuse: Callable[[str], Exception]) -> list[Run]:
    """The runs of one runtime: all of them, or this machine's, or refused."""
    groups: dict[tuple[str, ...], list[Run]] = {}
    for run in runs:
        groups.setdefault(ids[run.info.run_id].group, []).append(run)
    if len(groups) == 1:
        return list(runs)
    local = [members for key, members in groups.items() if key[3] == here]
    if len(local) == 1:
        return local[0]
    named = "; ".join(ids[members[0].info.run_id].describe() for members in groups.values())
    if len({key[2] for key in groups}) > 1:  # several networks side by side (the `net` group)
        raise refuse(
            f"its runs are of {len(groups)} runtimes ({named}): {CHOICE_NOTE}. Promote one network's best with "
            "--run ID (the sweep's end and its report name each net's best run)"
        )
    raise refuse(f"its runs are of {len(groups)} runtimes ({named}): promote one with --run ID")


def choose_runs(
    runs: Sequence[Run], settings: Settings, *, scratch_requested: bool, config_named: bool, here: str, sweep: str
) -> RuntimeChoice:
    """The runs promote may choose among, and whether it writes a scratch runtime (module docstring)."""
    ids = {run.info.run_id: runtime_of(run.data.tags, run.data.params) for run in runs}

    def refuse(detail: str) -> CrossRuntime:
        return CrossRuntime(f"promote will not cross runtimes: {_serves(settings)}; sweep {sweep}: {detail}")

    same_config = [r for r in runs if not (ids[r.info.run_id].config and settings.source) or
                   Path(ids[r.info.run_id].config) == settings.source]  # fmt: skip
    scratch: str | None = None
    if scratch_requested:
        pool, scratch = same_config, "--runtime-dir"
    else:
        pool = [r for r in runs if misfit(ids[r.info.run_id], settings) is None]
        if not pool and same_config and all(_flagged(r, SYNTHETIC_NET) for r in same_config):
            pool, scratch = same_config, "a synthetic net's runs never go into a runtime config in place"
        elif not pool and same_config and not config_named and all(_flagged(r, SIMULATED) for r in same_config):
            pool, scratch = same_config, "a simulated sweep"
    if not pool:
        theirs = list({ids[r.info.run_id].group: ids[r.info.run_id] for r in runs}.values())
        described = "; ".join(f"{rt.describe()} ({misfit(rt, settings)})" for rt in theirs[:_LISTED])
        backend = theirs[0].backend if theirs else "BACKEND"
        option = f" --config {shown_path(settings.source)}" if config_named and settings.source else ""
        raise refuse(
            f"its runs are {described}. Nothing written. Promote them into a runtime of their own: "
            f"python -m kgbench.promote{option} --runtime-dir {runtime_dir_hint(backend)}"
        )
    chosen = _group(pool, ids, here, refuse)
    kept = {r.info.run_id for r in chosen}
    left: dict[tuple[str, ...], tuple[RuntimeId, int]] = {}
    for run in runs:
        if run.info.run_id not in kept:
            rt = ids[run.info.run_id]
            left[rt.group] = (rt, left.get(rt.group, (rt, 0))[1] + 1)
    return RuntimeChoice(chosen, scratch, tuple(left.values()))


def promote_command(run: Run) -> str:
    """The promote command that takes this run (a sweep's best job) where it belongs: the runtime config it was
    composed from in place when it fits, else a runtime of its own; simulated or synthetic runs say so."""
    tags = run.data.tags
    if _flagged(run, SIMULATED):
        return "python -m kgbench.promote --allow-simulated"
    runtime = runtime_of(tags, run.data.params)
    config = Path(runtime.config) if runtime.config else DEFAULT_CONFIG_PATH
    option = "" if config == DEFAULT_CONFIG_PATH.resolve() else f" --config {shown_path(config)}"
    if _flagged(run, SYNTHETIC_NET):
        return f"python -m kgbench.promote{option} --allow-synthetic"
    try:
        fits = misfit(runtime, load_settings(config)) is None
    except ConfigError:
        fits = False
    return f"python -m kgbench.promote{option}" + (
        "" if fits else f" --runtime-dir {runtime_dir_hint(runtime.backend)}"
    )
