"""Hydra's basic (grid) sweeper, with a preflight and the jobs that share a TensorRT build run back to back.

The grid is Hydra's (the product of the sweep overrides, in batches of ``max_batch_size``); before launching, every
job's config is composed (as Hydra's own validation does). The preflight (kgbench.sweep.preflight) leaves out the
jobs whose engine cannot start here, saying which and why, and refuses a sweep with none left before anything is
recorded; then the sweep's MLflow parent run is opened (kgbench.sweep.callbacks.open_sweep: a store that cannot take
it refuses the sweep, one line) and the jobs are reordered by ``build_key`` (kgbench.sweep.grouping) so the user
need not order the overrides.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.types import Override
from omegaconf import DictConfig, OmegaConf

from kgbench.sweep import preflight, state
from kgbench.sweep.grouping import build_key, group_jobs
from kgbench.sweep.labels import display_overrides
from kgbench.sweep.lazy_callback import open_sweep
from kgbench.track import store_errors
from kgserve.engine.client import is_simulated

__all__ = ["GroupedSweeper"]

_REMOTE_LAUNCHERS = ("PBSLauncher",)  # their jobs run on other nodes, which see other files


def _note(message: str) -> None:
    print(f"kgbench: {message}", file=sys.stderr, flush=True)


class GroupedSweeper(BasicSweeper):
    def split_arguments(self, overrides: list[Override], max_batch_size: int | None) -> list[list[list[str]]]:  # type: ignore[override]
        jobs = [job for batch in BasicSweeper.split_arguments(overrides, None) for job in batch]
        configs = {tuple(job): self._compose(job) for job in jobs}
        plan = self._preflight(jobs, configs)
        if plan is not None:
            if (refusal := plan.refusal()) is not None:  # before MLflow is even imported (docs/performance.md)
                _note(refusal)
                state.refuse(refusal)
                return []
            for line in plan.skip_lines():
                _note(line)
            jobs = [jobs[index] for index in plan.runnable]
        keys = {tuple(job): build_key(self._top(configs[tuple(job)])) for job in jobs}
        ordered = group_jobs(jobs, lambda job: keys[tuple(job)])
        builds = list(dict.fromkeys(key for key in keys.values() if key is not None))
        if builds:
            moved = " (reordered)" if ordered != jobs else ""
            _note(
                f"{len(builds)} TensorRT engine build(s): {', '.join(builds)}; the jobs sharing one run back to "
                f"back{moved}, so TensorRT builds (or loads) each engine once"
            )
        assert self.config is not None
        simulated = all(is_simulated(str(configs[tuple(job)].get("backend", ""))) for job in ordered)
        skipped = plan.skipped if plan else ()
        # the sweep's recording side (MLflow, matplotlib) is imported only here, once the sweep runs: a refused one
        # never loads it (kgbench.sweep.lazy_callback)
        if refusal := open_sweep(self.config, len(ordered), simulated=simulated, skipped=skipped):
            state.refuse(refusal)  # a full, damaged or unreachable store: no job could record itself
            return []
        return list(BasicSweeper.split_overrides_to_chunks(ordered, max_batch_size))

    def sweep(self, arguments: list[str]) -> Any:
        """Hydra's sweep; a full or read-only multirun folder (Hydra writes each job's .hydra/ there before the job
        runs) ends it with one line and exit 1, and the sweep's end still runs (a raise here would skip it)."""
        try:
            return super().sweep(arguments)
        except OSError as exc:
            if (problem := store_errors.describe(exc)) is None:
                raise
            line = f"the sweep stopped: folder {self.config.hydra.sweep.dir if self.config else '?'}: {problem}"
            _note(line)
            state.fail(line)
            return []  # no job returns (a race after the sweep finds no contenders)

    def _preflight(
        self, jobs: Sequence[Sequence[str]], configs: dict[tuple[str, ...], DictConfig]
    ) -> preflight.Plan | None:
        assert self.config is not None
        launcher = str(self.config.hydra.launcher.get("_target_", ""))
        if any(name in launcher for name in _REMOTE_LAUNCHERS):
            return None
        return preflight.plan([(display_overrides(list(job)), configs[tuple(job)]) for job in jobs])

    def _compose(self, job: Sequence[str]) -> DictConfig:
        assert self.hydra_context is not None and self.config is not None
        return self.hydra_context.config_loader.load_sweep_config(master_config=self.config, sweep_overrides=list(job))

    @staticmethod
    def _top(cfg: DictConfig) -> dict[str, Any]:
        plain = OmegaConf.to_container(cfg, resolve=False)
        assert isinstance(plain, dict)
        return {str(k): v for k, v in plain.items() if k != "hydra"}
