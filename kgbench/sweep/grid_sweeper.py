"""Hydra's basic (grid) sweeper, with the jobs that share a TensorRT build run back to back.

The grid is Hydra's (the product of the sweep overrides, in batches of ``max_batch_size``); before launching, every
job's config is composed (as Hydra's own validation does) and the jobs are reordered by ``build_key``
(kgbench.sweep.grouping) so the user need not order the overrides. The order is printed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.types import Override
from omegaconf import OmegaConf

from kgbench.sweep.grouping import build_key, group_jobs

__all__ = ["GroupedSweeper"]

log = logging.getLogger(__name__)


class GroupedSweeper(BasicSweeper):
    def split_arguments(self, overrides: list[Override], max_batch_size: int | None) -> list[list[list[str]]]:  # type: ignore[override]
        jobs = [job for batch in BasicSweeper.split_arguments(overrides, None) for job in batch]
        keys = {tuple(job): self._key(job) for job in jobs}
        ordered = group_jobs(jobs, lambda job: keys[tuple(job)])
        if ordered != jobs:
            log.info("kgbench: jobs reordered so that jobs sharing a TensorRT build run back to back")
        for job in ordered:
            if keys[tuple(job)] is not None:
                log.info("  build %s: %s", keys[tuple(job)], " ".join(job))
        return list(BasicSweeper.split_overrides_to_chunks(ordered, max_batch_size))

    def _key(self, job: Sequence[str]) -> str | None:
        assert self.hydra_context is not None and self.config is not None
        cfg = self.hydra_context.config_loader.load_sweep_config(master_config=self.config, sweep_overrides=list(job))
        plain = OmegaConf.to_container(cfg, resolve=False)
        assert isinstance(plain, dict)
        return build_key({str(k): v for k, v in plain.items() if k != "hydra"})
