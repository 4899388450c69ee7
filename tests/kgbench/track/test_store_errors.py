"""kgbench.track.store_errors on real failures, in this process: a real damaged sqlite file, a real ENOSPC from a
real full tmpfs (else the OSError the kernel gives), a closed loopback port, and the store's lock held by another
opener (the subprocess tests: tests/kgbench/sweep/test_store_faults.py)."""

from __future__ import annotations

import errno
import socket
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from kgbench.track import store_errors
from tests.helpers.full_disk import full_disk


def test_a_damaged_sqlite_file_says_damaged_and_names_the_store(tmp_path: Path) -> None:
    db = tmp_path / "mlflow.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x)")
    db.write_bytes(b"junk" * 100)
    with pytest.raises(sqlite3.DatabaseError) as caught:
        sqlite3.connect(db).execute("SELECT * FROM t")
    error = store_errors.store_error(caught.value, f"sqlite:///{db}")
    assert error is not None and str(error).startswith(f"MLflow store {db}: damaged: file is not a database")


def test_a_full_disk_names_the_folder_written_when_it_is_not_the_stores(tmp_path: Path) -> None:
    with full_disk(tmp_path / "disk", 256) as disk:
        if not disk.real:
            pytest.skip("no tmpfs can be mounted here")
        disk.fill()
        with pytest.raises(OSError) as caught:
            (disk.path / "report.csv").write_text("x" * 100_000)
    assert caught.value.errno == errno.ENOSPC
    assert caught.value.filename is None  # a failed write() names no file: the caller names the folder
    error = store_errors.store_error(caught.value, f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}", disk.path)
    assert error is not None and error.where == f"folder {disk.path}" and error.problem.startswith("the disk is full")
    named = OSError(errno.ENOSPC, "No space left on device", str(disk.path / "report.csv"))  # as open() gives it
    error = store_errors.store_error(named, f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
    assert error is not None and error.where == f"folder {disk.path}"
    in_store = store_errors.store_error(caught.value, f"sqlite:///{disk.path / 'mlflow.db'}")
    assert in_store is not None and in_store.where == f"MLflow store {disk.path / 'mlflow.db'}"


def test_a_bug_is_not_a_store_error() -> None:
    assert store_errors.store_error(KeyError("req_per_s"), "sqlite:////x/mlflow.db") is None


def test_a_closed_port_is_unreachable_at_once() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(store_errors.StoreError, match=rf"MLflow store http://127.0.0.1:{port}: unreachable"):
        store_errors.probe(f"http://127.0.0.1:{port}")
    store_errors.probe("sqlite:////nowhere/mlflow.db")  # not a server: nothing to probe


def test_the_first_opening_of_a_sqlite_store_waits_for_the_other(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    order: list[str] = []
    held = threading.Event()

    def first() -> None:
        with store_errors.sqlite_init_lock(uri):
            held.set()
            time.sleep(0.5)
            order.append("first done")

    thread = threading.Thread(target=first)
    thread.start()
    held.wait(timeout=30)
    with store_errors.sqlite_init_lock(uri):  # another open file description: flock makes it wait
        order.append("second in")
    thread.join(timeout=30)
    assert order == ["first done", "second in"]


def test_a_text_metric_is_named() -> None:
    assert store_errors.unreadable_metric({"p99_ms": 3.0, "req_per_s": "fast"}) == (
        "its metric req_per_s holds 'fast', not a number (a damaged store)"
    )
    assert store_errors.unreadable_metric({"req_per_s": 12.5, "errors": 0}) is None
