"""The README's commands, run as printed: its bash blocks read from the file, each command run by bash in a fresh
clone (tests/helpers/clone.py) with `python` on PATH meaning this interpreter (the set-up line's virtual environment,
already made), so a README that drifts from the code fails its test."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

__all__ = ["INSTALL_STEPS", "bash_block", "readme_env", "run_step", "serve_args"]

# the set-up line's own steps: the test runs on this interpreter, with the clone on PYTHONPATH
INSTALL_STEPS = ("python3 -m venv", "pip install", ". .venv/bin/activate")


def bash_block(readme: Path, heading: str | None = None) -> list[str]:
    """The command lines (comments and blank lines left out) of the first ```bash block, or of the first one after
    the `## heading`."""
    text = readme.read_text(encoding="utf-8")
    if heading is not None:
        start = text.index(f"\n## {heading}\n")
        text = text[start:]
    block = re.search(r"```bash\n(.*?)```", text, re.DOTALL)
    assert block is not None, f"no ```bash block in {readme}" + (f" under '## {heading}'" if heading else "")
    return [ln.strip() for ln in block.group(1).splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def readme_env(clone: Path, shim_dir: Path, **extra: str) -> dict[str, str]:
    """The environment the README's commands run in: `python` is this interpreter (its virtual environment), the
    clone is what it imports, the clone's own MLflow store (no MLFLOW_ variable leaks in)."""
    shim_dir.mkdir(parents=True, exist_ok=True)
    shim = shim_dir / "python"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env.update(PATH=f"{shim_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(clone), PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def run_step(step: str, env: dict[str, str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """One README command, by bash, as printed; it must succeed."""
    done = subprocess.run(["bash", "-c", step], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{step}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


def serve_args(step: str) -> tuple[Path, list[str]]:
    """`python -m kgserve --config CONFIG ARGS...` -> (CONFIG, ARGS): the serve step is started by the test (on a
    free port: the README's 9100 may be taken on a shared machine) and stopped when it has answered."""
    argv = shlex.split(step)
    assert argv[:4] == ["python", "-m", "kgserve", "--config"], step
    return Path(argv[4]), argv[5:]
