"""The journal file a study lives in: Optuna's JournalFileBackend, checked.

- **Writable before anything runs** (``check_writable``): a journal whose folder cannot be made, or that cannot be
  opened for appending, is refused with one line naming the path, before any job.
- **A torn last line is recovered.** A writer killed mid-write (SIGKILL, walltime, a lost node on a shared
  filesystem) can leave a last line without its newline. Optuna skips such a line when reading, but its next append
  would glue a whole operation onto it, and the journal would then be unreadable from that line on. Every append
  here first cuts a torn tail off, under the journal's own lock (so no writer is half-way through it), and says so;
  the trial it wrote to is re-measured when its lease runs out (kgbench.search.lease).
- **A corrupt line is refused** with one message naming the file and the line (``JournalError``), instead of a
  bare JSONDecodeError from deep inside Optuna (``check_readable`` before the search, and on any read).
- **One asker at a time** (``ask_lock``): the sweepers sharing a journal take turns to reap lost trials and ask new
  ones, so that a config one of them is about to measure is visible to the others before they ask (each config
  measured once). A lock file next to the journal, of Optuna's own NFS-safe kind.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock

from kgbench.search.space import SearchError

__all__ = ["CheckedJournalFile", "JournalError", "ask_lock", "check_readable", "check_writable", "open_storage"]

log = logging.getLogger(__name__)

ASK_LOCK_SUFFIX = ".ask"  # the ask lock: <journal>.ask.lock (Optuna's own lock is <journal>.lock)
ASK_LOCK_GRACE_S = 60  # a lock older than this is taken for a dead holder's and broken (Optuna's rule)


class JournalError(SearchError):
    """The journal file cannot be used: one line naming the file (and the line, for a corrupt one)."""


def check_writable(path: str | Path) -> Path:
    """The journal's absolute path once its folder exists and the file opens for appending; else JournalError."""
    journal = Path(path).expanduser().resolve()
    try:
        journal.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocker = next((p for p in (journal.parent, *journal.parent.parents) if p.exists() and not p.is_dir()), None)
        why = f"{blocker} is a file" if blocker else exc.strerror or str(exc)
        raise JournalError(f"hydra.sweeper.journal={journal}: cannot make its folder {journal.parent}: {why}") from None
    try:
        with open(journal, "ab"):
            pass
    except OSError as exc:
        raise JournalError(
            f"hydra.sweeper.journal={journal}: cannot write the Optuna journal there: {exc.strerror or exc}"
        ) from None
    if not os.access(journal.parent, os.W_OK | os.X_OK):  # the lock files go next to the journal
        raise JournalError(f"hydra.sweeper.journal={journal}: its folder {journal.parent} is not writable "
                           "(the journal's lock files go there)")  # fmt: skip
    return journal


def _first_bad_line(path: Path) -> tuple[int, int, str] | None:
    """(line number from 1, lines in all, what is wrong) of the first line that is not a journal operation; a last
    line without its newline (torn, recovered on the next append) does not count."""
    with open(path, "rb") as f:
        lines = f.readlines()
    for number, line in enumerate(lines, start=1):
        if not line.endswith(b"\n"):  # only the last line can lack its end: torn, not corrupt
            return None
        try:
            if isinstance(json.loads(line), dict):
                continue
            why = "not a JSON object"
        except json.JSONDecodeError as exc:
            why = f"not JSON: {exc.msg}"
        except UnicodeDecodeError:
            why = "not UTF-8"
        excerpt = line[:80].decode("utf-8", "replace").rstrip("\n")
        return number, len(lines), f"{why}: {excerpt!r}"
    return None


def _corrupt(path: Path, bad: tuple[int, int, str]) -> JournalError:
    number, total, why = bad
    return JournalError(
        f"the Optuna journal {path} is corrupt at line {number} of {total} ({why}); nothing after it can be read: "
        "move the file aside (the search then starts a new study) or delete that line (what it recorded is lost)"
    )


def check_readable(path: str | Path) -> None:
    """JournalError naming the file and line when a line of the journal is not an operation."""
    journal = Path(path)
    if journal.exists() and (bad := _first_bad_line(journal)) is not None:
        raise _corrupt(journal, bad)


class CheckedJournalFile(JournalFileBackend):
    """Optuna's journal file that recovers a torn last line before it appends, and names the file and the line when
    a line cannot be read."""

    def __init__(self, file_path: str) -> None:
        super().__init__(file_path, JournalFileSymlinkLock(file_path))
        self.path = Path(file_path)

    def read_logs(self, log_number_from: int) -> Generator[dict[str, Any], None, None]:
        try:
            yield from super().read_logs(log_number_from)
        except ValueError:  # JSONDecodeError, or Optuna's "Invalid log format." for a line without its end
            bad = _first_bad_line(self.path)
            if bad is None:
                raise
            raise _corrupt(self.path, bad) from None

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        # Optuna's own append (JournalFileBackend.append_logs), with the torn tail cut off under the same lock
        self._lock.acquire()
        try:
            self._cut_torn_tail()
            text = "\n".join(json.dumps(item, separators=(",", ":")) for item in logs) + "\n"
            with open(self.path, "ab") as f:
                f.write(text.encode("utf-8"))
                f.flush()
                os.fsync(f.fileno())
        finally:
            self._lock.release()

    def _cut_torn_tail(self) -> None:
        with open(self.path, "rb+") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return
            f.seek(0)
            data = f.read()
            keep = data.rfind(b"\n") + 1
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())
        line = data.count(b"\n", 0, keep) + 1
        log.warning("the Optuna journal %s: its last line (line %d, %d bytes) was torn, its writer killed mid-write: "
                    "cut off (a trial it was telling is re-measured once its lease runs out)", self.path, line,
                    size - keep)  # fmt: skip


def open_storage(journal: str | Path) -> JournalStorage:
    """The journal file's storage (its folder is created); the path should be on a filesystem every worker sees."""
    path = Path(journal).expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    return JournalStorage(CheckedJournalFile(str(path)))


@contextmanager
def ask_lock(journal: str | Path) -> Iterator[None]:
    """Held while a sweeper reaps lost trials and asks new ones (one asker per journal at a time)."""
    lock = JournalFileSymlinkLock(str(Path(journal).expanduser().resolve()) + ASK_LOCK_SUFFIX, ASK_LOCK_GRACE_S)
    lock.acquire()
    try:
        yield
    finally:
        lock.release()
