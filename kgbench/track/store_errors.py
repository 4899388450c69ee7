"""What goes wrong with an MLflow store or a folder kgbench writes, in one line: the one place every entry point
(`python -m kgbench`, `python -m kgbench.promote`, `python -m kgbench.report`) turns a full disk, a damaged sqlite
store, a metric that is not a number or a tracking server nobody answers into `<where>: <problem>` instead of a
traceback (docs/kgbench.md, "When the store or the disk fails").

It also keeps MLflow from waiting minutes on a server that is gone: MLflow retries each HTTP call 7 times with a
backoff of up to minutes; kgbench bounds that to seconds (`bound_http`, unless the user set MLflow's own variables)
and checks that the server's port answers before its first call (`probe`). And it serialises the first creation and
migration of a sqlite store (`sqlite_init_lock`): two processes that open a fresh store at once both run MLflow's
migrations, and one fails with "Online migration expected to match one row".
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import socket
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from mlflow.entities import Run

__all__ = [
    "HTTP_LIMITS",
    "StoreError",
    "bound_http",
    "describe",
    "probe",
    "readable_runs",
    "sqlite_init_lock",
    "sqlite_path",
    "store_error",
    "store_name",
    "unreadable_metric",
]

# MLflow's own variables, set only where the user did not: 2 retries 1 s and 2 s apart (with jitter), 20 s a call
HTTP_LIMITS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
}
PROBE_TIMEOUT_S = 5.0
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)
# sqlite's own texts (through sqlite3 and SQLAlchemy, often inside an MlflowException), first match wins
_SQLITE_PROBLEMS = (
    ("database or disk is full", "the disk is full (database or disk is full)"),
    ("database disk image is malformed", "damaged: database disk image is malformed"),
    ("file is not a database", "damaged: file is not a database"),
    ("malformed database schema", "damaged: malformed database schema"),
    ("database is locked", "locked by another process for too long (database is locked)"),
    ("unable to open database file", "cannot be opened (unable to open database file)"),
    ("attempt to write a readonly database", "not writable (attempt to write a readonly database)"),
    ("disk i/o error", "the disk failed (disk I/O error)"),
)
_DAMAGED_HINT = "; restore it from a backup, or move it aside so that kgbench starts a new one"
_UNREACHABLE = ("Failed to establish a new connection", "Max retries exceeded", "Connection refused", "timed out")


class StoreError(Exception):
    """A store (or a folder) kgbench cannot use; str() is the one line to print."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


def sqlite_path(uri: str) -> Path | None:
    """The database file of a `sqlite:///` store (None for any other store)."""
    return Path(uri.removeprefix("sqlite:///")).expanduser() if uri.startswith("sqlite:///") else None


def store_name(uri: str) -> str:
    """How the line names a store: its database file, or its URI."""
    db = sqlite_path(uri)
    return f"MLflow store {db}" if db is not None else f"MLflow store {uri}"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        item = todo.pop(0)
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        todo += [item.__cause__, item.__context__]


def _os_problem(error: OSError) -> str | None:
    where = f" writing {error.filename}" if error.filename else ""
    if error.errno in _DISK_FULL:
        return f"the disk is full ({os.strerror(error.errno)}{where})"
    if error.errno in _NOT_WRITABLE:
        return f"not writable ({os.strerror(error.errno)}{where})"
    return None


def describe(exc: BaseException) -> str | None:
    """The problem `exc` (or what caused it) says, in a few words; None when it is not a store or disk problem
    (a bug: let it show)."""
    for item in _chain(exc):
        if isinstance(item, OSError) and (problem := _os_problem(item)) is not None:
            return problem
        text = str(item).lower()
        for needle, problem in _SQLITE_PROBLEMS:
            if needle in text:
                return problem + (_DAMAGED_HINT if problem.startswith("damaged") else "")
        if "online migration expected to match" in text:
            return "its schema migration collided with another process's (run the command again)"
        name = type(item).__name__
        if name in ("ConnectionError", "NewConnectionError", "MaxRetryError", "ConnectTimeout", "ReadTimeout") or (
            "api request to" in text and any(n.lower() in text for n in _UNREACHABLE)
        ):
            return "unreachable (no answer from the tracking server)"
    return None


def store_error(exc: BaseException, uri: str, folder: Path | None = None) -> StoreError | None:
    """`exc` as a StoreError naming the store at `uri` (itself when it is one), or None when it is not a store or
    disk problem. A full or read-only disk met writing a file outside the store's folder names that file's folder
    (a report's, a job's); `folder`: the one to name when the error does not say which file (a failed write()
    does not)."""
    if isinstance(exc, StoreError):
        return exc
    problem = describe(exc)
    if problem is None:
        return None
    return StoreError(_where(exc, uri, folder), problem)


def _where(exc: BaseException, uri: str, folder: Path | None) -> str:
    db = sqlite_path(uri)
    for item in _chain(exc):
        if isinstance(item, OSError) and _os_problem(item) is not None:
            if not item.filename:
                return f"folder {folder}" if folder is not None else store_name(uri)
            written = Path(str(item.filename)).expanduser().resolve().parent
            if db is None or not written.is_relative_to(db.resolve().parent):
                return f"folder {written}"
    return store_name(uri)


def bound_http(environ: Any = None) -> None:
    """MLflow made to fail fast and once: its HTTP retries bounded to seconds, unless the user set them; urllib3's
    per-retry warnings and MLflow's own traceback of a failed SQL statement muted (the line that counts is kgbench's,
    naming the store and the problem)."""
    env = os.environ if environ is None else environ
    for name, value in HTTP_LIMITS.items():
        env.setdefault(name, value)
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    sql_log = logging.getLogger("mlflow.store.db.utils")  # its INFO lines (a new store's tables) stay
    if _no_errors not in sql_log.filters:
        sql_log.addFilter(_no_errors)


def _no_errors(record: logging.LogRecord) -> bool:
    return record.levelno < logging.ERROR


def probe(uri: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """An http(s) tracking server's port must accept a connection within `timeout_s`: StoreError otherwise, before
    any MLflow call waits on it. Other stores pass."""
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout_s):
            pass
    except OSError as exc:
        why = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__)
        raise StoreError(store_name(uri), f"unreachable ({why} at {parts.hostname}:{port})") from exc


@contextlib.contextmanager
def sqlite_init_lock(uri: str) -> Iterator[None]:
    """Held while a sqlite store is opened for the first time in this process (MLflow creates and migrates its schema
    then): an exclusive lock on `<db>.lock` beside the database, so that two sweeps started together on a fresh store
    migrate it one after the other. Other stores: nothing."""
    db = sqlite_path(uri)
    if db is None:
        yield
        return
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
        handle = open(db.with_name(db.name + ".lock"), "a+b")  # noqa: SIM115 (closed below)
    except OSError:  # a folder this user may only read: reading needs no lock, and a write will say what is wrong
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def unreadable_metric(metrics: dict[str, Any]) -> str | None:
    """Why a run's metrics cannot be read (a value that is not a number: a damaged or hand-edited store), or None."""
    for key, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"its metric {key} holds {str(value)[:40]!r}, not a number (a damaged store)"
    return None


def readable_runs(runs: Sequence[Run]) -> list[Run]:
    """The runs whose metrics are all numbers; each other one is skipped with its reason on stderr (one line each),
    so that promote, report and a sweep's end rank the rest instead of stopping on a ValueError."""
    kept = []
    for run in runs:
        if (why := unreadable_metric(run.data.metrics)) is None:
            kept.append(run)
        else:
            print(f"kgbench: run {run.info.run_id} skipped: {why}", file=sys.stderr, flush=True)
    return kept
