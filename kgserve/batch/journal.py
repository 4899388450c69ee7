"""The run's journal, `OUT.partial.jsonl`: what makes a killed run resumable without losing or repeating a row.

Its first line is a header naming the input (digest and row count) and the settings (digest); then one record per
answered row, `{"row": N, "error": KIND|null, "lines": [...]}`, appended and flushed as each answer arrives, in
the order answers arrive. A rerun reads it back: the rows it holds are not asked again. A last line torn by a kill
(no newline, or not JSON) is cut off. A journal of other input or other settings is refused, never mixed in.

At the end `assemble` writes the output in input order from the journal (a temporary file, then renamed over
OUT) and removes the journal. Only one run may hold a journal (an exclusive lock on it).
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from kgserve.batch.answers import Answer
from kgserve.batch.summary import Tally

__all__ = ["FORMAT", "Header", "Journal", "JournalRefused", "journal_path"]

FORMAT = "kgserve.batch/1"


class JournalRefused(Exception):
    """The journal is for another input or other settings, or another run holds it; the message says what to do."""


@dataclass(frozen=True)
class Header:
    input_digest: str
    settings_digest: str
    rows: int
    input_text: str  # for the messages: what the input was
    settings_text: str

    def line(self) -> bytes:
        record = {"journal": FORMAT, "input": self.input_digest, "settings": self.settings_digest,
                  "rows": self.rows, "input_text": self.input_text, "settings_text": self.settings_text}  # fmt: skip
        return json.dumps(record).encode() + b"\n"


def journal_path(output: Path) -> Path:
    return output.with_name(output.name + ".partial.jsonl")


def _refusal(header: Header, found: dict[str, object], path: Path) -> str | None:
    if found.get("journal") != FORMAT:
        return f"{path} is not a journal of this command ({FORMAT})"
    if found.get("input") != header.input_digest or found.get("rows") != header.rows:
        return (f"the input changed since {path} was started (then: {found.get('input_text')}, "
                f"{found.get('rows')} rows; now: {header.input_text}, {header.rows} rows)")  # fmt: skip
    if found.get("settings") != header.settings_digest:
        return (f"the settings changed since {path} was started (then: {found.get('settings_text')}; "
                f"now: {header.settings_text})")  # fmt: skip
    return None


class Journal:
    """An open journal: `done` (row -> the offset of its record), `record()` appends one answer."""

    def __init__(self, path: Path, file: IO[bytes], done: dict[int, int]) -> None:
        self.path = path
        self._file = file
        self.done = done

    @classmethod
    def open(cls, path: Path, header: Header, *, restart: bool = False) -> Journal:
        file = path.open("a+b")
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.close()
            raise JournalRefused(f"another run is writing {path}: wait for it, or stop it") from None
        try:
            if restart:
                file.truncate(0)
            done = cls._read(file, header, path)
        except BaseException:
            file.close()
            raise
        return cls(path, file, done)

    @staticmethod
    def _read(file: IO[bytes], header: Header, path: Path) -> dict[int, int]:
        file.seek(0)
        first = file.readline()
        if not first.endswith(b"\n"):  # new, or killed while writing its header
            file.truncate(0)
            file.write(header.line())
            file.flush()
            return {}
        try:
            found = json.loads(first)
        except ValueError:
            found = {}
        if (why := _refusal(header, found, path)) is not None:
            raise JournalRefused(f"{why}. Rerun with the same input and options to resume, or add --restart to "
                                 "start over (the answers in it are discarded).")  # fmt: skip
        done: dict[int, int] = {}
        good = file.tell()
        while line := file.readline():
            try:
                row = json.loads(line)["row"] if line.endswith(b"\n") else None
            except (ValueError, KeyError, TypeError):
                row = None
            if not isinstance(row, int):
                break  # torn by a kill: this and anything after it is cut off
            done.setdefault(row, good)
            good = file.tell()
        file.truncate(good)
        file.seek(good)
        return done

    def record(self, row: int, answer: Answer) -> None:
        """Append one row's answer and flush it: once this returns, a kill does not lose it."""
        lines = [line.decode("utf-8", "replace") for line in answer.lines]
        record = {"row": row, "error": answer.error, "lines": lines}
        offset = self._file.tell()
        self._file.write(json.dumps(record, ensure_ascii=False).encode() + b"\n")
        self._file.flush()
        self.done.setdefault(row, offset)

    def assemble(self, output: Path, rows: int) -> Tally:
        """Write every row's lines to `output` in input order (temp file, fsync, rename), then remove the
        journal; the tally counts answers and errors over every row, answered in this run or before."""
        missing = [row for row in range(rows) if row not in self.done]
        if missing:
            raise RuntimeError(f"{len(missing)} rows unanswered (first: {missing[:5]}): nothing assembled")
        tally = Tally()
        temp = output.with_name(f".{output.name}.{os.getpid()}.tmp")
        reader = self.path.open("rb")
        try:
            with temp.open("wb") as out:
                for row in range(rows):
                    reader.seek(self.done[row])
                    record = json.loads(reader.readline())
                    lines: list[str] = record["lines"]
                    for line in lines:
                        out.write(line.encode() + b"\n")
                    tally.add(record["error"], lines)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, output)
        finally:
            reader.close()
            temp.unlink(missing_ok=True)
        self.path.unlink()
        return tally

    def close(self) -> None:
        self._file.close()
