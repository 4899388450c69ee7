"""`python -m kgbench [-m] [group=option ...] [key=value ...]`: Hydra sweeps over KataGo serving configs.

KataGo keys are plain top-level names (`nnMaxBatchSize=64,128,256`). Hydra only lets a command line
override keys that the composed config already has, so plain `name=value` overrides that are not config
groups are passed to Hydra as `++name=value` (set or add): a key no group sets (`nnRandomize=false`) works
too, and a misspelt one (`nnMaxBatchSze=64`) reaches kgbench's validation, which names the closest valid
key, instead of a Hydra struct error. The exit status is 0 when at least one job succeeded, 1 when none did, 2 when
none could start (nothing recorded: kgbench.sweep.preflight), 130 / 143 when stopped by SIGINT / SIGTERM (its runs
marked KILLED: kgbench.sweep.interrupt).

`python -m kgbench --space [-m] hparams_search=optuna ...` prints a search's space, budget and sampler and runs
nothing (docs/sweeps.md shows how to narrow it).

Hydra answers `--help`, `--cfg`, `--info` and a refused single run or sweep before or without a job: those paths
import only Hydra, the preflight and this module. The job's own modules (MLflow, matplotlib through kgbench.track,
~1.5 s) and the search's (Optuna) are imported inside the functions that use them, once per process
(docs/performance.md: 2.0 s against a bare Hydra app's 0.2 s before; tests/kgbench/test_light_paths.py keeps it so).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import hydra
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from kgbench.sweep import interrupt, state
from kgbench.sweep.labels import display_overrides
from kgserve.paths import PROJECT_ROOT

__all__ = ["CONF_DIR", "hydra_job", "job_function", "main", "rewrite_overrides", "show_space", "single_run_refusal"]

CONF_DIR = PROJECT_ROOT / "conf"
_PLAIN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=", re.DOTALL)


def config_groups(conf_dir: Path = CONF_DIR) -> set[str]:
    return {p.name for p in conf_dir.iterdir() if p.is_dir()} | {"hydra"}


def rewrite_overrides(args: Sequence[str], groups: set[str] | None = None) -> list[str]:
    """`key=value` -> `++key=value` for plain top-level keys that are not config groups; the rest unchanged."""
    groups = config_groups() if groups is None else groups
    out: list[str] = []
    for arg in args:
        match = _PLAIN.match(arg)
        out.append(f"++{arg}" if match and match.group(1) not in groups else arg)
    return out


def with_grid_sweeper(args: Sequence[str]) -> list[str]:
    """A multirun that names no sweeper (hparams_search=..., hydra/sweeper=...) gets kgbench's grid sweeper, which
    runs the jobs that share a TensorRT build back to back (kgbench.sweep.grid_sweeper)."""
    out = list(args)
    multirun = any(arg in ("-m", "--multirun") for arg in out)
    named = any(arg.lstrip("+").startswith(("hparams_search=", "hydra/sweeper=")) for arg in out)
    return [*out, "hydra/sweeper=kgbench_grid"] if multirun and not named else out


def single_run_refusal(cfg: DictConfig) -> str | None:
    """Why a single run (no -m) cannot start here, before anything is recorded (kgbench.sweep.preflight; a sweep's
    sweeper asks for all its jobs at once); None when it can, or in a multirun."""
    from kgbench.sweep import preflight  # kgserve's settings (pydantic): not on the --help and --cfg paths

    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode is not None and str(hydra_cfg.mode.name) == "MULTIRUN":
        return None
    label = display_overrides(list(hydra_cfg.overrides.task)) or "defaults"
    return preflight.plan([(label, cfg)]).refusal()


def job_function(cfg: DictConfig) -> float:
    """The plain job function: run one job, never raise, return its req/s (NaN when it failed). A single run (no
    -m) whose engine cannot start is refused before anything is recorded, as a sweep is (kgbench.sweep.preflight)."""
    if (refusal := single_run_refusal(cfg)) is not None:
        print(f"kgbench: {refusal}", file=sys.stderr, flush=True)
        state.refuse(refusal)
        return math.nan
    # the job itself: MLflow, matplotlib, Optuna's trial records (~1.5 s), only once a job runs
    from kgbench.sweep.job import context_from_hydra, run_job
    from kgbench.track.tracking import use_configured_uri

    use_configured_uri(cfg.get("mlflow", {}).get("tracking_uri"))
    ctx = context_from_hydra()
    try:
        outcome = run_job(cfg, ctx)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # run_job does not raise; this is the last line of defence for the sweep
        print(f"kgbench: job failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        state.record_job(False)
        return math.nan
    state.record_job(outcome.ok)
    return outcome.value


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def hydra_job(cfg: DictConfig) -> float:
    return job_function(cfg)


def show_space(args: Sequence[str]) -> int:
    """The search space the command line would search, its budget and sampler; no job, no MLflow run."""
    # the search's modules (Optuna's distributions), only on this path
    from kgbench.search.describe import describe_search, rewrite_keys
    from kgbench.search.space import SearchError, parse_space
    from kgbench.search.start import FACTORS, KATAGO

    overrides = [a for a in rewrite_overrides(args) if a not in ("-m", "--multirun", "--space")]
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
        plain = [str(o.input_line) for o in parsed if not o.is_sweep_override()]
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=plain, return_hydra_config=True)
        sweeper = cfg.hydra.sweeper
        if "OptunaSweeper" not in str(sweeper.get("_target_", "")):
            print("not a search: add hparams_search=optuna (a grid runs every combination of its sweeps)")
            return 2
        params = OmegaConf.to_container(sweeper.params, resolve=True) if sweeper.get("params") else {}
        task = [str(o.input_line) for o in parsed if not o.is_hydra_override()]
        space = parse_space([*rewrite_keys({str(k): str(v) for k, v in (params or {}).items()},  # type: ignore[union-attr]
                                           config_groups()), *task])  # fmt: skip
        sampler = OmegaConf.to_container(sweeper.sampler, resolve=True) if sweeper.get("sampler") else {}
        start = sweeper.get("start", KATAGO)
        start = OmegaConf.to_container(start, resolve=True) if isinstance(start, DictConfig) else start
        budget_s = sweeper.get("budget_s")
        lines = describe_search(space, int(sweeper.n_trials), sampler or {}, start,  # type: ignore[arg-type]
                                {key: cfg.get(key) for key in FACTORS}, budget_s)  # fmt: skip
    except (SearchError, Exception) as exc:  # Hydra's composition errors: one line
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    for line in lines:
        print(line)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--space" in args:
        return show_space(args)
    sys.argv = [sys.argv[0], *with_grid_sweeper(rewrite_overrides(args))]
    state.reset()
    with interrupt.stop_on_signals():
        try:
            hydra_job()
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the job has stopped its target and marked its run
            return _stopped()
    return state.exit_status()


def _stopped() -> int:
    """The sweep was stopped by a signal: its runs marked KILLED, its progress bar ended, the shell's status for
    that signal (130 for SIGINT, 143 for SIGTERM)."""
    from kgbench.sweep import progress  # a sweep's modules: only once one ran (the light paths import none)
    from kgbench.sweep.sweep_end import end_interrupted

    progress.stop_sweep()
    reason = interrupt.interrupt_reason()
    end_interrupted(state.sweep_run(), reason)
    print(f"kgbench: {reason.split(':')[0]}", file=sys.stderr, flush=True)
    return interrupt.EXIT_STATUS.get(interrupt.received(), 130)


if __name__ == "__main__":
    sys.exit(main())
