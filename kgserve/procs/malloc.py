"""glibc's malloc tuned for a server whose big buffers come and go (request bodies, engine lines, answers).

glibc serves an allocation of 128 KiB or more with mmap, and gives it back to the system when it is freed; but
each such free raises the threshold (up to 32 MiB), so later ~1 MB bodies come from the heap, where what is freed
stays in the process (RSS stayed at 1-2.8 GB after 1,000 concurrent ~1 MB queries had gone, issue 27). Fixing the
thresholds keeps big buffers on mmap (returned as soon as they are freed) and lets the heap's top be trimmed;
two arenas at most keep a helper thread (the parse thread, kgserve.admission.checks) from holding a heap of its
own. A no-op where malloc is not glibc's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging

__all__ = ["MMAP_THRESHOLD", "trim_malloc", "tune_malloc"]

log = logging.getLogger("kgserve")
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8
MMAP_THRESHOLD = 128 << 10  # glibc's own default, made fixed
TRIM_THRESHOLD = 1 << 20
ARENA_MAX = 2


@functools.cache
def _libc() -> ctypes.CDLL | None:
    # once per process: find_library runs `ldconfig -p` in a child, which trim_malloc must not do on the event loop
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


def trim_malloc() -> bool:
    """Give the heap's free pages back to the system (glibc's malloc_trim(0): the free runs inside the heap too,
    not only its top). After a burst of big requests the chunks they were read in are free but scattered; without
    this RSS stays where the burst left it. False where there is no glibc."""
    libc = _libc()
    trim = getattr(libc, "malloc_trim", None)
    if trim is None:
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    trim(0)
    return True


def tune_malloc() -> bool:
    """Fix glibc's malloc thresholds (module docstring); False where there is no glibc to tune."""
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    done = all(
        mallopt(option, value) == 1
        for option, value in (
            (M_MMAP_THRESHOLD, MMAP_THRESHOLD),
            (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
            (M_ARENA_MAX, ARENA_MAX),
        )
    )
    if not done:
        log.debug("malloc: mallopt refused a setting (not glibc?)")
    return done
