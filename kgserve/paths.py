"""The repository root, once: the checkout this package runs from (`pip install -e .`), where runtime/, conf/,
assets/ and the MLflow store live. No imports beyond the standard library: every part of the project may use it."""

from __future__ import annotations

from pathlib import Path

__all__ = ["PROJECT_ROOT"]

PROJECT_ROOT = Path(__file__).resolve().parent.parent
