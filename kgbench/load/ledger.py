"""Positions shared out between the jobs of one sweep: a ledger file in the multirun directory.

The jobs of a sweep walk one position order (one seed, the first job's) and reserve blocks of it as they go:
a reservation reads the ledger and appends one line, ``START COUNT job=... host=... pid=...``, under an exclusive
lock, so no two jobs get the same offset, whether they run one after another, in parallel processes or on
several nodes. Offsets past the number of distinct positions start the order again: those positions were
handed out before in the sweep and are counted as repeats (kgbench.load.traffic).

Why a ledger and not a fixed share of the order per job number: a job does not know how many positions it will
send (the ladder extends until saturation, `load.repeats`, a pruner may stop it early), and a sweep does not
always know how many jobs it will have (an Optuna study, a sweep resumed into its folder). Fixed shares strand
the positions a short job never sends while a long job runs out of its own; with the ledger the sweep sends
every distinct position once before any repeats, and loses at most one unused block tail per job.

The lock is fcntl's POSIX record lock (``lockf``): NFS and the parallel filesystems of clusters honour it across
nodes, where BSD ``flock`` may be only node-local. POSIX locks belong to the process, so a thread lock keeps
two reservations in one process (a threaded launcher) apart as well.
"""

from __future__ import annotations

import fcntl
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BLOCK", "LEDGER_NAME", "LedgerError", "PositionLedger"]

LEDGER_NAME = "positions.ledger"
# Positions per reservation: a job loses at most BLOCK - 1 of them at its end, and takes the lock once per BLOCK
# requests (two short reads and an append: about 0.1 ms on a local disk, a few on NFS).
BLOCK = 64
_MAGIC = "kgbench position ledger v1"
_TAIL = 4096  # bytes read from either end of the ledger: a line is far shorter
_JOB_CHARS = 256  # of the job's label in its lines
_THREAD_LOCK = threading.Lock()


class LedgerError(ValueError):
    """The ledger cannot be used: not a ledger, or made for another set of positions."""


@dataclass(frozen=True)
class _Header:
    seed: int
    positions: int

    def line(self) -> str:
        return f"{_MAGIC}: seed={self.seed} positions={self.positions}\n"


def _read(fd: int, offset: int, size: int) -> str:
    chunks = []
    while size > 0 and (chunk := os.pread(fd, size, offset)):
        chunks.append(chunk)
        offset += len(chunk)
        size -= len(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


def _state(path: Path, fd: int) -> tuple[_Header | None, int]:
    """(header, next free offset) of the open ledger; (None, 0) when it is empty. Reservations are appended in
    order under the lock, so the last line ends the highest one: only the head and the tail are read."""
    size = os.fstat(fd).st_size
    if size == 0:
        return None, 0
    head = _read(fd, 0, min(size, _TAIL)).split("\n", 1)[0]
    tail = _read(fd, max(0, size - _TAIL), _TAIL).rstrip("\n").rsplit("\n", 1)[-1]
    try:
        if not head.startswith(_MAGIC + ":"):
            raise ValueError(f"its first line is {head[:80]!r}")
        fields = dict(item.split("=", 1) for item in head.split(":", 1)[1].split())
        header = _Header(int(fields["seed"]), int(fields["positions"]))
        if tail == head:
            return header, 0
        start, count = tail.split()[:2]
        return header, int(start) + int(count)
    except (KeyError, ValueError) as exc:
        reason = f"{path} is not a kgbench position ledger ({exc}); remove it or use another sweep dir"
        raise LedgerError(reason) from None


class PositionLedger:
    """One job's handle on its sweep's ledger (created with its header by the first job). ``seed`` is the sweep's
    order seed, the first job's ``load.seed``, which every job follows whatever its own seed."""

    def __init__(self, path: Path, *, seed: int, positions: int, job: str) -> None:
        if positions < 1:
            raise LedgerError(f"a ledger needs at least one position, got {positions}")
        self.path = path
        self.job = " ".join(job.split())[:_JOB_CHARS] or "?"
        self.header = self._transact(_Header(seed, positions), 0)[0]
        self.reserved = 0  # positions this handle reserved (sent or not)

    @property
    def seed(self) -> int:
        return self.header.seed

    @property
    def positions(self) -> int:
        return self.header.positions

    def reserve(self, count: int = BLOCK) -> range:
        """The next ``count`` offsets of the sweep's order, for this job alone (offsets >= ``positions`` are the
        order's later passes: positions handed out before)."""
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        start = self._transact(self.header, count)[1]
        self.reserved += count
        return range(start, start + count)

    def offsets(self, block: int = BLOCK) -> Iterator[int]:
        """This job's offsets, one block reserved at a time when the last one is used up (a QuerySource's
        ``offsets``)."""
        while True:
            yield from self.reserve(block)

    def _transact(self, new: _Header, count: int) -> tuple[_Header, int]:
        """Under the lock: the header (written from ``new`` when the ledger has none) and the next free offset,
        reserving ``count`` offsets from it (0: none)."""
        with _THREAD_LOCK:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX)
                header, end = _state(self.path, fd)
                if header is not None and header.positions != new.positions:
                    raise LedgerError(
                        f"{self.path} shares out {header.positions} positions, this job has {new.positions}: the "
                        "jobs of a sweep must draw from the same sample games, symmetries and komi values"
                    )
                text = "" if header is not None else new.line()
                if count:
                    text += f"{end} {count} host={socket.gethostname()} pid={os.getpid()} job={self.job}\n"
                if text:
                    # one write with O_APPEND: whole lines. No fsync (2 ms a block on a local disk, in the load
                    # generator's event loop): other processes read the page cache, and an NFS client writes the
                    # file back to the server before it releases the lock
                    os.write(fd, text.encode("utf-8"))
                return header or new, end
            finally:
                os.close(fd)  # releases the lock
