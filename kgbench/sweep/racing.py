"""The race at the end of a sweep (kgbench.decide.race): after the grid or the search, the runs tied with the leader
are re-measured, interleaved, each replicate a fresh job launched by the sweep's own launcher (so it runs where the
sweep's jobs ran: this machine, or PBS nodes), until they separate or `race.max_rounds` is spent.

A replicate is a job with its contender's overrides as launched (tag kgbench.job_overrides) plus `++race.of=RUN
++race.round=N`: it is tagged kgbench.race_of / kgbench.race_round, and promote folds it into the run it re-measured.
The outcome is tagged on the sweep's run (kgbench.race) and printed. Never raises: a race that cannot run says why,
and one that fails tags the sweep's run `kgbench.race=failed: ...`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from hydra.plugins.launcher import Launcher
from omegaconf import DictConfig, OmegaConf

from kgbench.decide import runs as runlib
from kgbench.decide.race import RaceSettings, contenders, replicate_counts, run_race
from kgbench.decide.selection import choose_winner, objective_for
from kgbench.sweep import progress, state
from kgbench.sweep.callbacks import ENV_JOBS, ENV_PARENT
from kgbench.track import tracking
from kgbench.track.schema import JOB_OVERRIDES, RACE, RACE_ROUND

__all__ = ["race_after_sweep"]


def _note(message: str) -> None:
    print(f"kgbench: {message}", file=sys.stderr, flush=True)


def _settings(config: DictConfig) -> RaceSettings:
    node = config.get("race")
    plain = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else {}
    return RaceSettings.from_mapping({str(k): v for k, v in (plain or {}).items()})  # type: ignore[union-attr]


def _smoke(config: DictConfig) -> bool:
    choices = OmegaConf.select(config, "hydra.runtime.choices", default=None)
    return bool(choices is not None and str(choices.get("load", "")) == "smoke")


def race_after_sweep(sweeper: Any, returns: Sequence[Sequence[Any]]) -> None:
    """Race the sweep's contenders with ``sweeper``'s launcher (a sweeper that launched ``returns``); none after a
    sweep whose store or folder failed (its line said so)."""
    if state.failed():
        return
    try:
        _race(sweeper.launcher, sweeper.config, sum(len(batch) for batch in returns))
    except Exception as exc:  # a race must never cost the sweep its summary
        failure = f"{type(exc).__name__}: {exc}"
        _note(f"the race of the contenders did not run to its end: {failure}")
        _tag_failure(failure)


def _tag_failure(failure: str) -> None:
    """The sweep's run says the race failed (replicates it launched before are in MLflow): promote's readers must
    not take a missing kgbench.race tag for "no contenders"."""
    parent_id = os.environ.get(ENV_PARENT)
    if parent_id is None:
        return
    try:
        tracking.make_client().set_tag(parent_id, RACE, f"failed: {failure}"[:5000])
    except Exception as exc:  # the store itself is what failed: the note above is all there is
        _note(f"could not tag the sweep's run with the race's failure: {type(exc).__name__}: {exc}")


def _race(launcher: Launcher, config: DictConfig, launched: int) -> None:
    settings = _settings(config)
    parent_id = os.environ.get(ENV_PARENT)
    if parent_id is None or settings.enabled is False:
        return
    client = tracking.make_client()
    runs = runlib.sweep_children(client, client.get_run(parent_id))
    cands = runlib.candidates(runs)
    selection = choose_winner(cands, allow_simulated=True, allow_synthetic=True, objective=objective_for(cands))
    racing = contenders(selection, settings.max_contenders)
    if len(racing) < 2:
        return
    simulated = all(c.simulated for c in cands if c.run_id in racing)
    if not settings.on(simulated, _smoke(config)):
        _note(f"{len(racing)} runs tied with the leader; no race (race.enabled=auto: off for the simulated engine "
              "and load=smoke; race.enabled=true races them)")  # fmt: skip
        return
    by_id = {run.info.run_id: run for run in runs}
    overrides = {run: json.loads(by_id[run].data.tags[JOB_OVERRIDES]) for run in racing}
    next_index = launched
    expected = launched + settings.max_rounds * len(racing)

    def measure_round(order: list[str], round_no: int) -> Mapping[str, float | None]:
        nonlocal next_index
        _note(f"race round {round_no} of at most {settings.max_rounds}: {', '.join(r[:12] for r in order)}")
        os.environ[ENV_JOBS] = str(expected)
        progress.grow_sweep(expected)
        batch = [[*overrides[run], f"++race.of={run}", f"++race.round={round_no}"] for run in order]
        launcher.launch(batch, initial_job_idx=next_index)
        next_index += len(batch)
        now = runlib.sweep_children(client, client.get_run(parent_id))
        rounds = {run.info.run_id: run.data.tags.get(RACE_ROUND) for run in now}
        values: dict[str, float | None] = {}
        for rep in runlib.job_candidates(now):
            if rep.replicate_of in order and rounds.get(rep.run_id) == str(round_no):
                values[rep.replicate_of] = rep.req_per_s if replicate_counts(rep) else None
        return values

    outcome = run_race(racing, measure_round, settings)
    text = outcome.summary()
    client.set_tag(parent_id, RACE, text[:5000])
    _note(text)
