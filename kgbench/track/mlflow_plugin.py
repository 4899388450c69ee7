"""kgbench's MLflow plugin, for one thing: a quiet `mlflow ui`.

MLflow 3's server uses starlette's WSGI middleware, which starlette 1.x deprecates with a warning that `mlflow ui`
prints once per server worker (four times) and that no user of kgbench can act on. MLflow loads the
`mlflow.run_context_provider` entry points (pyproject.toml) when it is imported, before its server imports that
middleware: loading this module filters that one warning, matched by its text and MLflow's server module, and
nothing else. The provider itself is never in context (kgbench records its runs through MlflowClient, which asks no
provider), so it adds no tag to any run.
"""

from __future__ import annotations

import warnings

from mlflow.tracking.context.abstract_context import RunContextProvider

__all__ = ["QuietServerContext"]

warnings.filterwarnings("ignore", message=r"starlette\.middleware\.wsgi is deprecated", module=r"mlflow\.server")


class QuietServerContext(RunContextProvider):
    def in_context(self) -> bool:
        return False

    def tags(self) -> dict[str, str]:
        return {}
