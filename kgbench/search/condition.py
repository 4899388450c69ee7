"""What a search measures under: its measuring condition (pure).

A trial's value is a figure of its config *and* of everything the search did not vary: the backend, the KataGo binary
and the network (by content), the load, every fixed cfg key, the machine, simulated or real. A study holds the
figures of one condition only (kgbench.search.studies), so the condition has two parts:

- ``config``: the job's composed config without what a search varies (its searched keys) and without what does not
  change a figure (``NOT_MEASURED``: Hydra's own settings, the MLflow store, the race after the search, the
  contention check's thresholds, the search's bookkeeping, and ``engine.*``, whose files count by content below),
  flattened to dotted keys (``load.concurrency``, ``nnMaxBatchSize``);
- ``environment``: what the config does not say, found where the search runs (kgbench.sweep.search_condition):
  the engine binary's and the network's content (sha256), the simulated engine's settings, the machine (the GPU's
  name, else the host; under a remote launcher the nodes it asks for).

``shown`` holds what helps a reader and is no part of the condition (paths, the binary's version line). Two
conditions are the same when both parts are equal; ``differences`` names what differs, in one short phrase each.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf

__all__ = ["CONDITION_ATTR", "NOT_MEASURED", "Condition", "config_condition", "flatten"]

CONDITION_ATTR = "kgbench.condition"  # study: the condition its trials were measured under
NOT_MEASURED = ("hydra", "mlflow", "race", "contention", "search", "engine")


def _plain(value: Any) -> Any:
    """JSON's own view of a value (lists for tuples, str keys), so a condition read back from the journal compares
    equal to one built here."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings -> dotted keys (lists stay values)."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def _section(cfg: DictConfig, key: str) -> Any:
    node = cfg[key]
    if not isinstance(node, DictConfig):
        return node
    try:
        return OmegaConf.to_container(node, resolve=True)
    except Exception:  # an interpolation only a job can resolve: the text as written is still the setting
        return OmegaConf.to_container(node, resolve=False)


def config_condition(cfg: DictConfig, searched: Iterable[str]) -> dict[str, Any]:
    """The config part of a search's condition: ``cfg`` (the sweep's composed config) flattened, less the keys the
    search varies (and anything under them) and ``NOT_MEASURED``."""
    tree = {str(key): _section(cfg, str(key)) for key in cfg if str(key) not in NOT_MEASURED}
    flat = flatten(_plain(tree))
    varied = tuple(searched)
    return {k: v for k, v in sorted(flat.items()) if not any(k == s or k.startswith(f"{s}.") for s in varied)}


def _short(value: Any) -> str:
    text = "not set" if value is _MISSING else json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 60 else f"{text[:57]}..."


_MISSING = object()


@dataclass(frozen=True)
class Condition:
    config: dict[str, Any]
    environment: dict[str, str]
    shown: dict[str, str] = field(default_factory=dict)  # for the reader only: no part of the condition

    @classmethod
    def of(
        cls, config: Mapping[str, Any], environment: Mapping[str, str], shown: Mapping[str, str] | None = None
    ) -> Condition:
        return cls(_plain(dict(config)), {str(k): str(v) for k, v in environment.items()}, dict(shown or {}))

    def key(self) -> str:
        """A digest of the condition (sha256 hex)."""
        text = json.dumps({"config": self.config, "environment": self.environment}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def as_attr(self) -> dict[str, Any]:
        return {"config": self.config, "environment": self.environment, "shown": self.shown}

    @classmethod
    def from_attr(cls, value: object) -> Condition | None:
        if not isinstance(value, Mapping) or not isinstance(value.get("config"), Mapping):
            return None
        return cls.of(value["config"], value.get("environment") or {}, value.get("shown") or {})

    def same(self, other: Condition) -> bool:
        return self.config == other.config and self.environment == other.environment

    def differences(self, other: Condition, limit: int = 6) -> list[str]:
        """What ``other`` (an earlier study's) has that this one does not: ``key: theirs -> ours``."""
        out = []
        for ours, theirs in ((self.environment, other.environment), (self.config, other.config)):
            for key in sorted(set(ours) | set(theirs)):
                a, b = theirs.get(key, _MISSING), ours.get(key, _MISSING)
                if a != b:
                    out.append(f"{key}: {_short(a)} -> {_short(b)}")
        return out[:limit] + ([f"and {len(out) - limit} more"] if len(out) > limit else [])

    def describe(self) -> str:
        """One line: the environment (with the paths behind it) and the count of fixed config keys."""
        first = [key for key in ("engine", "network", "machine") if key in self.environment]
        keys = [*first, *sorted(set(self.environment) - set(first))]
        parts = [f"{key}={self.environment[key]}" + (f" ({self.shown[key]})" if key in self.shown else "")
                 for key in keys]  # fmt: skip
        return f"{'; '.join(parts) or 'no environment recorded'}; {len(self.config)} fixed config keys"
