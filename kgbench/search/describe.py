"""The search before any job runs, in words (what `python -m kgbench --space` and the sweeper print), and the
search's overrides as the sweeper reads them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from kgbench.search.space import SearchSpace
from kgbench.search.start import KATAGO, describe_start, start_params
from kgbench.search.study import startup_trials

__all__ = ["describe_search", "plain", "rewrite_keys"]


def rewrite_keys(params: Mapping[str, str], groups: set[str]) -> list[str]:
    """``params`` (key -> sweep expression) as override strings; plain top-level keys that are not config groups
    get ``++`` (like kgbench's command line), so a KataGo key no config sets can be searched too."""
    out = []
    for key, value in params.items():
        plain = "." not in key and "/" not in key and not key.startswith(("+", "~")) and key not in groups
        out.append(f"{'++' if plain else ''}{key}={value}")
    return out


def describe_search(
    space: SearchSpace,
    n_trials: int,
    sampler: Mapping[str, Any],
    start: object = KATAGO,
    known: Mapping[str, object] | None = None,
    budget_s: float | None = None,
) -> list[str]:
    """The search before any job runs: the space, the budget, the start and the sampler (what `python -m kgbench
    --space` and the sweeper print). Raises SearchError for a start that is not in the space."""
    size = space.size
    share = f" ({min(n_trials, size) / size:.0%} of the space)" if size else ""
    seconds = (f"budget: hydra.sweeper.budget_s={budget_s:g} job-seconds (the search stops asking once another job, "
               "as long as the longest so far, would pass it)") if budget_s else None  # fmt: skip
    name = str(sampler.get("name", "tpe"))
    startup = sampler.get("n_startup_trials", "auto")
    if name == "tpe" and str(startup) == "auto":
        startup = startup_trials(n_trials)
    how = f"tpe, {startup} random start-up trial(s)" if name == "tpe" else name
    return [
        f"search space ({len(space.distributions)} parameter(s)):",
        *space.describe(),
        f"budget: hydra.sweeper.n_trials={n_trials} measured configs{share}; a repeated config reuses its result and "
        "costs nothing" + ("; a finite space is sampled without repeats" if size else ""),
        *([seconds] if seconds else []),
        describe_start(space, start_params(space, start, known), start),
        f"sampler: {how}",
        "narrow it: ~hydra.sweeper.params.KEY drops a key (it keeps the config's value); "
        "hydra.sweeper.params.KEY='tag(ordered, choice(2, 4))' searches fewer values; KEY=VALUE fixes it",
    ]


def plain(node: Mapping[str, Any] | None) -> dict[str, Any]:
    if node is None:
        return {}
    if isinstance(node, DictConfig):
        container = OmegaConf.to_container(node, resolve=True)
        return {str(k): v for k, v in container.items()} if isinstance(container, dict) else {}
    return dict(node)
