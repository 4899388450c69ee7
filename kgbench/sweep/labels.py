"""A job's overrides as the user typed them: its label in every line kgbench prints and in the preflight's refusal.

Light on purpose (no MLflow, no Optuna): `python -m kgbench` refuses a single run that cannot start with this and the
preflight alone (kgbench.__main__, docs/performance.md).
"""

from __future__ import annotations

__all__ = ["BOOKKEEPING", "display_overrides"]

BOOKKEEPING = ("++search.", "++race.")  # overrides a sweeper adds to link a job to its trial or race round


def display_overrides(overrides: list[str]) -> str:
    """The override string as the user typed it (kgbench adds `++` to plain KataGo keys; the Optuna sweeper's
    `++search.*` trial links and a race's `++race.of/round` are bookkeeping, not configuration)."""
    return " ".join(item.removeprefix("++") for item in overrides if not item.startswith(BOOKKEEPING))
