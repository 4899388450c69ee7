"""A fresh `git clone` of this checkout with its uncommitted state (edits and new files, committed in the clone), so
a test runs the README's commands on the code under test as a new user's clone would, and can check afterwards that
they left every tracked file as it was (`git_status`)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.conftest import REPO

__all__ = ["clone_working_tree", "git", "git_status"]


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t.invalid"}
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t.invalid")
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


def git_status(clone: Path) -> str:
    """`git status --porcelain`: empty when the clone is as it was cloned (ignored files aside)."""
    return git("status", "--porcelain", cwd=clone)


def clone_working_tree(target: Path) -> Path:
    """`git clone` of this checkout into `target`, then its uncommitted state copied in and committed there."""
    git("clone", "--quiet", "--no-hardlinks", str(REPO), str(target), cwd=REPO.parent)
    changed = git("diff", "--name-only", "HEAD", cwd=REPO).splitlines()
    changed += git("ls-files", "--others", "--exclude-standard", cwd=REPO).splitlines()
    for name in changed:
        source, copy = REPO / name, target / name
        if source.is_file():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy)
        else:
            copy.unlink(missing_ok=True)
    git("add", "-A", cwd=target)
    if git_status(target).strip():
        git("commit", "--quiet", "-m", "working tree under test", cwd=target)
    return target
