"""A folder on a full disk, for the tests of what kgbench does when a write fails for want of space.

Where the test may mount one (root, and `mount -t tmpfs` allowed: a container may forbid it), the folder is a real
tmpfs of a few MiB, filled to its last block by `fill()`: every write there fails with ENOSPC as on a full disk, and
sqlite says "database or disk is full". Elsewhere nothing can be filled for real without filling a disk others use,
so the fault is injected instead: `preexec` gives the command a file-size limit (RLIMIT_FSIZE) of the folder's
largest file, so that no file it writes can grow (EFBIG, "File too large"; sqlite: "disk I/O error"), and `real` is
False so that a test can say which it ran.
"""

from __future__ import annotations

import contextlib
import errno
import resource
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FullDisk", "full_disk"]


@dataclass
class FullDisk:
    path: Path
    real: bool  # a real tmpfs filled to the last block; False: a file-size limit injected into the command

    def fill(self) -> None:
        """No block left on the folder's filesystem (a real tmpfs); nothing to do for the injected fault."""
        if not self.real:
            return
        with open(self.path / ".filler", "wb") as handle:
            chunk = b"\0" * 65536
            try:
                while True:
                    handle.write(chunk)
                    handle.flush()
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
        with contextlib.suppress(OSError), open(self.path / ".filler-tail", "wb") as tail:  # the last partial block
            while True:
                tail.write(b"\0")
                tail.flush()

    def preexec(self) -> Callable[[], None] | None:
        """For subprocess.run(preexec_fn=...): the injected fault's file-size limit; None on a real full disk."""
        if self.real:
            return None
        largest = max((p.stat().st_size for p in self.path.rglob("*") if p.is_file()), default=0)

        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (largest, largest))

        return limit


def _mount(folder: Path, size_kib: int) -> bool:
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(folder)],
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@contextlib.contextmanager
def full_disk(folder: Path, size_kib: int = 4096) -> Iterator[FullDisk]:
    """`folder` on a tmpfs of `size_kib` KiB where one can be mounted (unmounted at the end), else a plain folder
    whose fault is injected (FullDisk.preexec). Copy what the test needs into it, then `fill()`."""
    folder.mkdir(parents=True, exist_ok=True)
    real = _mount(folder, size_kib)
    try:
        yield FullDisk(folder, real)
    finally:
        if real:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True, timeout=30)
