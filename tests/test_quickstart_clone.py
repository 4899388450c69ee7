"""The README's first command, step by step as printed, in a fresh `git clone`: afterwards `git status` is clean.

The steps are read from the README itself (its first command line, split on `&&`), so a quick start that starts
writing tracked files again, or a step that no longer runs as printed, fails here. Setting up is skipped: the clone
runs on this interpreter (tests/helpers/readme.py). The clone holds this checkout's working tree (uncommitted edits
and new files included, committed in the clone), so the test checks the code under test, not the last commit.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import REPO, kgserve_ready
from tests.helpers.clone import clone_working_tree, git_status
from tests.helpers.readme import INSTALL_STEPS, bash_block, readme_env, run_step, serve_args

pytestmark = pytest.mark.slow


def readme_first_command(readme: Path) -> list[str]:
    """The `&&`-separated steps of the first command in the README's first bash block."""
    return [step.strip() for step in bash_block(readme)[0].split("&&")]


def test_the_readme_runs_in_its_activated_environment() -> None:
    """Past the set-up line, every command is the plain `python -m ...` the user's own commands are."""
    steps = readme_first_command(REPO / "README.md")
    assert steps[:3] == ["python3 -m venv .venv", ". .venv/bin/activate", "pip install -e '.[test]'"], steps
    assert all(step.startswith("python -m ") for step in steps[3:]), steps
    assert bash_block(REPO / "README.md")[1] == "python -m pytest -q"


@pytest.mark.timeout(900)  # a sweep, a promote and a kgserve start: a minute alone, far more on a loaded machine
def test_readme_first_command_leaves_a_clean_checkout(tmp_path: Path) -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    steps = [s for s in readme_first_command(REPO / "README.md") if not any(k in s for k in INSTALL_STEPS)]
    *batch, serve = steps
    assert any("kgbench.promote" in s for s in batch) and "-m kgserve" in serve, steps
    clone = clone_working_tree(tmp_path / "clone")
    assert git_status(clone) == ""
    env = readme_env(clone, tmp_path / "bin", KGSERVE_SIM_DEVICE="private", KGSERVE_SIM_SPEED="4")

    outputs = [run_step(step, env, clone, timeout=600) for step in batch]
    sweep, promote = outputs[0].stdout + outputs[0].stderr, outputs[-1].stdout
    assert "best job is run " in sweep and "promote it: python -m kgbench.promote --allow-simulated" in sweep
    assert promote.startswith("promoted run ") and len(promote.splitlines()) == 2, promote
    config, args = serve_args(serve)
    with kgserve_ready(config, env, *args, cwd=clone, log_dir=tmp_path) as (process, ready):
        base = str(process.url)
        assert ready["simulated"] is True and ready["backend"] == "sim"
        assert ready["provenance"]["simulated"] is True
        sample = clone / "assets" / "analysis" / "inputs" / "tsumego_straight3_9x9.json"
        query = {**json.loads(sample.read_text()), "maxVisits": 8}
        with urllib.request.urlopen(base + "/analysis", data=json.dumps(query).encode(), timeout=120) as resp:
            assert resp.status == 200
            assert any("moveInfos" in json.loads(line) for line in resp.read().splitlines() if line.strip())

    assert git_status(clone) == ""
    assert (clone / "runtime" / "scratch" / "katago_serving.cfg").is_file()  # where the simulated winner went
