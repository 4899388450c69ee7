"""An empty MLflow sqlite store for a test, copied from one made once per test process.

A new store runs MLflow's schema migrations first: 3-7 s on two busy cores, paid again by every test that points
kgbench, promote or `mlflow server` at a database of its own. Copying a migrated empty database takes milliseconds and
is the same store to MLflow (the schema at head, the Default experiment in it), so tests that check what is recorded
still start from an empty store. One difference: the Default experiment's artifact folder is where the template was
made (this process's ./mlruns/0), which nothing uses: kgbench and the tests record into experiments of their own,
whose artifacts live beside the store (kgbench.track.tracking.ensure_experiment). The README's own commands
(tests/test_quickstart_clone.py, tests/katago/test_readme.py) keep making their stores, as a user's first run does."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

__all__ = ["seed_store", "seeded_uri"]

_template: Path | None = None


def _made_once() -> Path:
    global _template
    if _template is None:
        from mlflow.tracking import MlflowClient  # ~1.5 s to import: only when a test needs a store

        folder = Path(tempfile.mkdtemp(prefix="kgbench-tests-mlflow-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        db = folder / "mlflow.db"
        MlflowClient(tracking_uri=f"sqlite:///{db}").search_experiments()  # creates and migrates the schema
        _template = db
    return _template


def seed_store(db: Path) -> Path:
    """An empty, migrated MLflow store at `db`, unless a file is there already (a test's second command reuses its
    store, as a user's does). Returns `db`."""
    if not db.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_made_once(), db)
    return db


def seeded_uri(db: Path) -> str:
    """`sqlite:///DB` for an empty store at `db` (seed_store)."""
    return f"sqlite:///{seed_store(db)}"
