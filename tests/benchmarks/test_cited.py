"""Every benchmark entry point is cited by the doc that holds its figures (issue 43 item 3), and docs/benchmarks.md's
index lists each one with that doc: a new harness that no doc names, or an index row left behind by a deleted one,
fails here by name. Reads files only (nothing imported or run)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import REPO

INDEX = "benchmarks.md"
INDEX_HEADING = "## Every harness and the doc that holds its figures"
_ROW = re.compile(r"^\|\s*`(?P<name>benchmarks[./][\w./]+)`\s*\|[^|]*\|(?P<docs>[^|]*)\|\s*$")
_LINK = re.compile(r"\]\(([\w.-]+\.md)\)")


def _has_main_guard(source: str) -> bool:
    """A top-level `if __name__ == "__main__":` (either way round)."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            sides = [node.test.left, *node.test.comparators]
            if any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
                isinstance(s, ast.Constant) and s.value == "__main__" for s in sides
            ):
                return True
    return False


def entry_points(root: Path) -> list[str]:
    """The runnable entry points under ROOT/benchmarks: `benchmarks.x.y` for a module with a `__main__` guard or a
    package with a `__main__.py`, `benchmarks/x.sh` for a shell script."""
    found = set()
    folder = root / "benchmarks"
    for path in folder.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        relative = path.relative_to(root).with_suffix("")
        if path.name == "__main__.py":
            found.add(".".join(relative.parent.parts))
        elif _has_main_guard(path.read_text(encoding="utf-8")):
            found.add(".".join(relative.parts))
    found.update(path.relative_to(root).as_posix() for path in folder.rglob("*.sh"))
    return sorted(found)


def names(text: str, entry: str) -> bool:
    """Whether TEXT names ENTRY itself, dotted or as a file: `benchmarks.search` is not named by
    `benchmarks.search_budget`, nor `benchmarks.calibration` by `benchmarks.calibration.gpu`."""
    forms = [entry] if entry.endswith(".sh") else [entry, entry.replace(".", "/") + ".py"]
    return any(re.search(rf"(?<![\w./]){re.escape(form)}(?![\w/]|\.\w)", text) for form in forms)


def docs(root: Path) -> dict[str, str]:
    """Every docs/*.md's text, the index's section left out of docs/benchmarks.md: a row of the index is no
    citation (the doc it points to is)."""
    texts = {path.name: path.read_text(encoding="utf-8") for path in sorted((root / "docs").glob("*.md"))}
    if INDEX in texts and INDEX_HEADING in texts[INDEX]:
        before, section = texts[INDEX].split(INDEX_HEADING, 1)
        texts[INDEX] = before + ("\n## " + section.split("\n## ", 1)[1] if "\n## " in section else "")
    return texts


def uncited(root: Path) -> list[str]:
    """Entry points that no docs/*.md names."""
    texts = docs(root)
    return [entry for entry in entry_points(root) if not any(names(text, entry) for text in texts.values())]


def index_rows(root: Path) -> dict[str, list[str]]:
    """docs/benchmarks.md's index: entry point -> the docs its row points to ("this page": the index's own)."""
    text = (root / "docs" / INDEX).read_text(encoding="utf-8")
    assert INDEX_HEADING in text, f"docs/{INDEX} has no section {INDEX_HEADING!r}"
    section = text.split(INDEX_HEADING, 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if match := _ROW.match(line):
            cell = match.group("docs")
            rows[match.group("name")] = _LINK.findall(cell) + ([INDEX] if "this page" in cell else [])
    return rows


def index_faults(root: Path) -> list[str]:
    """What the index gets wrong: an entry point without a row, a row without an entry point, a row pointing to
    no doc or to one that does not name its entry point."""
    rows = index_rows(root)
    entries = entry_points(root)
    texts = docs(root)
    faults = [f"{entry}: no row in docs/{INDEX}'s index" for entry in entries if entry not in rows]
    faults += [f"{name}: a row in docs/{INDEX}'s index, no such entry point" for name in rows if name not in entries]
    for name, pointed in rows.items():
        if not pointed:
            faults.append(f"{name}: its row names no doc")
        faults += [f"{name}: its row points to docs/{doc}, which does not name it" for doc in pointed
                   if not names(texts.get(doc, ""), name)]  # fmt: skip
    return faults


def test_every_entry_point_is_named_by_a_doc() -> None:
    assert entry_points(REPO), "no entry point found under benchmarks/: the finder is broken"
    assert uncited(REPO) == []


def test_the_index_lists_every_entry_point_with_the_doc_of_its_figures() -> None:
    assert index_faults(REPO) == []


def _tree(tmp_path: Path, rows: str, figures: str) -> Path:
    (tmp_path / "benchmarks" / "pkg").mkdir(parents=True)
    (tmp_path / "docs").mkdir()
    (tmp_path / "benchmarks" / "common.py").write_text("def helper() -> int:\n    return 1\n")
    (tmp_path / "benchmarks" / "made.py").write_text('import sys\n\nif __name__ == "__main__":\n    sys.exit(0)\n')
    (tmp_path / "benchmarks" / "made_more.py").write_text('if "__main__" == __name__:\n    pass\n')
    (tmp_path / "benchmarks" / "pkg" / "__main__.py").write_text("print(1)\n")
    (tmp_path / "benchmarks" / "run.sh").write_text("#!/bin/sh\n")
    (tmp_path / "docs" / INDEX).write_text(f"# x\n\n{INDEX_HEADING}\n\n| a | b | c |\n|---|---|---|\n{rows}")
    (tmp_path / "docs" / "figures.md").write_text(figures)
    return tmp_path


def test_the_checks_name_what_is_missing(tmp_path: Path) -> None:
    """The checks can fail: a planted tree with an uncited harness, a stale row and a row pointing to the wrong doc."""
    root = _tree(
        tmp_path,
        "| `benchmarks.made` | m | [figures.md](figures.md) |\n| `benchmarks.gone` | g | this page |\n"
        "| `benchmarks.pkg` | p | [figures.md](figures.md) |\n",
        "made by `python -m benchmarks.made_more` and `benchmarks/run.sh`; `benchmarks.pkg.sub` is not the package\n",
    )
    assert entry_points(root) == ["benchmarks.made", "benchmarks.made_more", "benchmarks.pkg", "benchmarks/run.sh"]
    assert uncited(root) == ["benchmarks.made", "benchmarks.pkg"]  # made: named by an index row alone
    assert index_faults(root) == [
        "benchmarks.made_more: no row in docs/benchmarks.md's index",
        "benchmarks/run.sh: no row in docs/benchmarks.md's index",
        "benchmarks.gone: a row in docs/benchmarks.md's index, no such entry point",
        "benchmarks.made: its row points to docs/figures.md, which does not name it",
        "benchmarks.gone: its row points to docs/benchmarks.md, which does not name it",
        "benchmarks.pkg: its row points to docs/figures.md, which does not name it",
    ]
