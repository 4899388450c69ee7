"""kgserve.atomicfile: the one all-or-none file replacement (runtime_config pin, promote's runtime files)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from kgserve.atomicfile import write_text_atomic


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_a_new_file_is_written_with_0644_in_a_new_folder(tmp_path: Path) -> None:
    target = tmp_path / "new" / "katago_serving.cfg"
    write_text_atomic(target, "a = 1\r\n")
    assert target.read_bytes() == b"a = 1\r\n"  # newlines as given
    assert _mode(target) == 0o644
    assert _leftovers(target.parent) == []


def test_an_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "config.yaml"
    target.write_text("old\n")
    target.chmod(0o600)
    write_text_atomic(target, "new\n")
    assert target.read_text() == "new\n"
    assert _mode(target) == 0o600


def test_a_refused_check_leaves_the_old_file_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "config.yaml"
    target.write_text("old\n")
    seen: list[str] = []

    def refuse(name: str) -> None:
        seen.append(Path(name).read_text())  # the check reads the new text, beside the target
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        write_text_atomic(target, "new\n", check=refuse)
    assert seen == ["new\n"]
    assert target.read_text() == "old\n"
    assert _leftovers(tmp_path) == []


def test_a_failed_replace_leaves_the_old_file_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "a-folder"
    target.mkdir()  # os.replace of a file over a directory fails
    with pytest.raises(OSError):
        write_text_atomic(target, "new\n")
    assert target.is_dir()
    assert _leftovers(tmp_path) == []
