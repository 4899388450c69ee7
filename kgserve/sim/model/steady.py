"""The steady state of one simulated engine process, as every device profile's model reports it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Steady"]


@dataclass(frozen=True)
class Steady:
    evals_per_s: float  # NN rows per second (cache misses only)
    visits_per_search: float  # visits per second of one active search
    batch: float
    device_util: float  # fraction of time this process keeps the device (cpu: the host's cores) busy
