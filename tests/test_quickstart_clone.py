"""The README's first command, step by step, in a fresh `git clone`: afterwards `git status` is clean.

The steps are read from the README itself (its first command line, split on `&&`), so a quick start that
starts writing tracked files again fails here. Installing is skipped: the clone runs on this interpreter
with PYTHONPATH=<clone>. The clone holds this checkout's working tree (uncommitted edits and new files
included, committed in the clone), so the test checks the code under test, not the last commit.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import REPO, kgserve_ready

PY = sys.executable
INSTALL_STEPS = ("python3 -m venv", "pip install")

pytestmark = pytest.mark.slow


def readme_first_command(readme: Path) -> list[str]:
    """The `&&`-separated steps of the first command in the README's first bash block."""
    block = re.search(r"```bash\n(.*?)```", readme.read_text(encoding="utf-8"), re.DOTALL)
    assert block is not None, f"no ```bash block in {readme}"
    line = next(ln for ln in block.group(1).splitlines() if ln.strip() and not ln.lstrip().startswith("#"))
    return [step.strip() for step in line.split("&&")]


def _git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t.invalid"}
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t.invalid")
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


def _clone_working_tree(target: Path) -> None:
    """`git clone` of this checkout, then its uncommitted state copied in and committed in the clone."""
    _git("clone", "--quiet", "--no-hardlinks", str(REPO), str(target), cwd=REPO.parent)
    changed = _git("diff", "--name-only", "HEAD", cwd=REPO).splitlines()
    changed += _git("ls-files", "--others", "--exclude-standard", cwd=REPO).splitlines()
    for name in changed:
        source, copy = REPO / name, target / name
        if source.is_file():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy)
        else:
            copy.unlink(missing_ok=True)
    _git("add", "-A", cwd=target)
    if _git("status", "--porcelain", cwd=target).strip():
        _git("commit", "--quiet", "-m", "working tree under test", cwd=target)


def _argv(step: str) -> list[str]:
    argv = shlex.split(step)
    assert argv[0] == ".venv/bin/python", f"a README step this test does not know how to run: {step!r}"
    return [PY, *argv[1:]]


@pytest.mark.timeout(900)  # a sweep, a promote and a kgserve start: a minute alone, far more on a loaded machine
def test_readme_first_command_leaves_a_clean_checkout(tmp_path: Path) -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    steps = [s for s in readme_first_command(REPO / "README.md") if not any(k in s for k in INSTALL_STEPS)]
    *batch, serve = steps
    assert any("kgbench.promote" in s for s in batch) and "-m kgserve" in serve, steps
    clone = tmp_path / "clone"
    _clone_working_tree(clone)
    assert _git("status", "--porcelain", cwd=clone) == ""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}  # the clone's own store
    env.update(PYTHONPATH=str(clone), KGSERVE_SIM_DEVICE="private", KGSERVE_SIM_SPEED="4")

    for step in batch:
        done = subprocess.run(_argv(step), cwd=clone, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{step}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    # the README's port (9100) may be taken on a shared machine: the same command on a free port
    serve_argv = _argv(serve)
    assert serve_argv[1:4] == ["-m", "kgserve", "--config"], serve
    config, *args = serve_argv[4:]
    with kgserve_ready(Path(config), env, *args, cwd=clone, log_dir=tmp_path) as (process, ready):
        base = str(process.url)
        assert ready["simulated"] is True and ready["backend"] == "sim"
        assert ready["provenance"]["simulated"] is True
        sample = clone / "assets" / "analysis" / "inputs" / "tsumego_straight3_9x9.json"
        query = {**json.loads(sample.read_text()), "maxVisits": 8}
        with urllib.request.urlopen(base + "/analysis", data=json.dumps(query).encode(), timeout=120) as resp:
            assert resp.status == 200
            assert any("moveInfos" in json.loads(line) for line in resp.read().splitlines() if line.strip())

    assert _git("status", "--porcelain", cwd=clone) == ""
    assert (clone / "runtime" / "scratch" / "katago_serving.cfg").is_file()  # where the simulated winner went
