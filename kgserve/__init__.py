"""kgserve: KataGo's analysis engine over HTTP, byte for byte (docs/http-api.md).

The public surface, imported lazily so that `import kgserve` stays light (no web framework, no engine,
and never mlflow):

- `create_app(settings)` -> the FastAPI app (kgserve.app)
- `load_settings(path)` / `Settings` / `ConfigError` (kgserve.settings)
- `main(argv)` -> the `python -m kgserve` entry point (kgserve.cli)
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["ConfigError", "Settings", "__version__", "create_app", "load_settings", "main"]
__version__ = "0.1.0"

_LAZY = {
    "create_app": "kgserve.app",
    "load_settings": "kgserve.settings",
    "Settings": "kgserve.settings",
    "ConfigError": "kgserve.settings",
    "main": "kgserve.cli",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kgserve' has no attribute {name!r}")
    return getattr(import_module(module), name)
