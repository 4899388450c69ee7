"""kgserve's public surface: `import kgserve` is light, and no part of the server imports mlflow."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def modules_after(code: str) -> set[str]:
    script = f"{code}\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())


def test_import_kgserve_is_light() -> None:
    loaded = modules_after("import kgserve")
    assert not {"fastapi", "starlette", "uvicorn", "mlflow", "kgserve.engine"} & loaded


def test_the_server_never_imports_mlflow() -> None:
    loaded = modules_after(
        "import kgserve, kgserve.app, kgserve.cli, kgserve.engine.pool\n"
        "assert callable(kgserve.create_app) and kgserve.main"
    )
    assert "fastapi" in loaded and "kgserve.engine.pool" in loaded
    assert not any(name == "mlflow" or name.startswith("mlflow.") for name in loaded)


def test_public_names() -> None:
    import kgserve

    assert set(kgserve.__all__) == {"ConfigError", "Settings", "__version__", "create_app", "load_settings", "main"}
    for name in kgserve.__all__:
        assert getattr(kgserve, name) is not None
