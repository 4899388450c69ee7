"""The sweep tests' real `mlflow server` and stub PBS commands (tests/kgbench/sweep/conftest.py), for the search's
two-node test."""

from tests.kgbench.sweep.conftest import mlflow_server, pbs_stub

__all__ = ["mlflow_server", "pbs_stub"]
