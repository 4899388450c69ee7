"""The import layering of pyproject.toml's [tool.importlinter] contracts, checked by the real `lint-imports`:
kgserve never imports kgbench or mlflow, the engine wing and admission know no web framework, http and ws do not
import each other, the sim stays out of kgserve's serving side, kgserve's and kgbench's parts import one way
(the engine wing's modules too, type-only imports included), kgbench never imports the benchmarks, and no package has
an import cycle. Also: kgbench keeps no function-local import of its own modules or kgserve's (such imports are how
cycles hide)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import REPO

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
PROJECT = {"kgserve", "kgbench"}


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )


def test_every_contract_is_kept() -> None:
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    done = _lint_imports(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Contracts: {len(contracts)} kept, 0 broken." in done.stdout


def test_a_forbidden_import_breaks_the_check(tmp_path: Path) -> None:
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    for name in ("kgserve", "kgbench", "benchmarks"):
        shutil.copytree(REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    protocol = tmp_path / "kgserve" / "katago" / "protocol.py"
    protocol.write_text(protocol.read_text() + "\nimport kgbench.decide.selection  # noqa\n")
    selection = tmp_path / "kgbench" / "decide" / "selection.py"
    selection.write_text(selection.read_text() + "\nimport kgbench.enginepipe.engineload  # noqa\n")
    # the engine wing's old circle, router -> dispatch, even as a type-only import (how it hid before)
    router = tmp_path / "kgserve" / "engine" / "router.py"
    type_only = "\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import kgserve.engine.dispatch\n"
    router.write_text(router.read_text() + type_only)
    done = _lint_imports(tmp_path)
    assert done.returncode != 0
    assert f"Contracts: {len(contracts) - 3} kept, 3 broken." in done.stdout, done.stdout
    assert "- kgserve.engine.router -> kgserve.engine.dispatch" in done.stdout, done.stdout


def _function_local_imports(path: Path) -> list[str]:
    found = []
    for func in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(func):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            found += [f"{path.relative_to(REPO)}:{node.lineno} {n}" for n in names if n.split(".")[0] in PROJECT]
    return found


# The entry point only: its light paths (--help, --cfg, a refused run) must not load the job's modules (MLflow,
# matplotlib, Optuna), which it imports inside the functions that run a job or print a search
# (tests/kgbench/test_light_paths.py); lint-imports still sees those imports.
LAZY_ENTRY_POINTS = {REPO / "kgbench" / "__main__.py"}


def test_kgbench_has_no_function_local_import_of_project_modules() -> None:
    paths = sorted(set((REPO / "kgbench").rglob("*.py")) - LAZY_ENTRY_POINTS)
    found = [hit for path in paths for hit in _function_local_imports(path)]
    assert found == []
