"""KataGo's model-file token stream, read and written.

A model file (`cpp/neuralnet/desc.cpp` is the reader, `export_model_pytorch.py` the writer) is whitespace-separated
text tokens (names, shapes, flags) with float blocks between them: `@BIN@` and little-endian float32s in a `.bin`
file, whitespace-separated decimals in a `.txt` file. Either may be gzipped. The number of floats in a block is never
written: it follows from the shapes just read, so only a parser that knows the grammar can find the next token.
"""

from __future__ import annotations

import gzip
import mmap
from pathlib import Path
from typing import Protocol

import numpy as np

__all__ = ["ByteSink", "ModelFormatError", "TokenReader", "TokenWriter", "binary_floats_for", "open_model_bytes"]

_WHITESPACE = b" \t\r\n\v\f"
_GZIP_MAGIC = b"\x1f\x8b"


class ModelFormatError(ValueError):
    """The file is not a KataGo model file this reader understands; the message names the layer."""


def binary_floats_for(path: Path) -> bool:
    """KataGo's rule: `.txt`/`.txt.gz` hold decimal floats, everything else `@BIN@` blocks."""
    name = path.name.lower()
    return not (name.endswith(".txt") or name.endswith(".txt.gz"))


def open_model_bytes(path: Path) -> bytes | mmap.mmap:
    """The file's uncompressed bytes: a gzipped file is inflated in memory, a plain one is mapped (a synthetic
    b40c768nbt is ~950 MB and need not be read to be parsed)."""
    with path.open("rb") as f:
        magic = f.read(2)
    if magic == _GZIP_MAGIC:
        with gzip.open(path, "rb") as gz:
            return gz.read()
    with path.open("rb") as f:
        if path.stat().st_size == 0:
            raise ModelFormatError(f"{path}: empty file")
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


class TokenReader:
    """Reads tokens and float blocks from a model file's bytes, as desc.cpp's `istream >>` does."""

    def __init__(self, data: bytes | mmap.mmap, binary_floats: bool) -> None:
        self._data = data
        self._pos = 0
        self._binary = binary_floats
        self.floats_read = 0  # every float block's length: what the file holds (KataGo's count leaves out BN stats)

    @property
    def position(self) -> int:
        return self._pos

    def token(self, what: str) -> str:
        data, pos, end = self._data, self._pos, len(self._data)
        while pos < end and data[pos] in _WHITESPACE:
            pos += 1
        start = pos
        while pos < end and data[pos] not in _WHITESPACE:
            pos += 1
        if start == pos:
            raise ModelFormatError(f"{what}: the file ended early (byte {start})")
        self._pos = pos
        return bytes(data[start:pos]).decode("ascii", errors="backslashreplace")

    def integer(self, what: str) -> int:
        text = self.token(what)
        try:
            return int(text)
        except ValueError:
            raise ModelFormatError(f"{what}: expected an integer, found {text[:40]!r}") from None

    def number(self, what: str) -> float:
        text = self.token(what)
        try:
            return float(text)
        except ValueError:
            raise ModelFormatError(f"{what}: expected a number, found {text[:40]!r}") from None

    def floats(self, count: int, what: str, keep: bool = False) -> np.ndarray | None:
        """Skips (or returns, with `keep`) a block of `count` floats; like desc.cpp, rejects NaN and infinity only
        when the values are kept (checking every weight of a 236 M-weight net costs seconds)."""
        self.floats_read += count
        if not self._binary:
            values = np.array([self.number(what) for _ in range(count)], dtype=np.float32)
            return values if keep else None
        data, pos = self._data, self._pos
        skipped = 0
        while pos < len(data) and data[pos] != ord("@"):
            pos += 1
            skipped += 1
            if skipped > 100:
                raise ModelFormatError(f"{what}: no '@BIN@' float block where one was expected (byte {self._pos})")
        if bytes(data[pos : pos + 5]) != b"@BIN@":
            raise ModelFormatError(f"{what}: did not find the '@BIN@' header of a float block (byte {pos})")
        start = pos + 5
        stop = start + 4 * count
        if stop > len(data):
            raise ModelFormatError(f"{what}: the file ends inside a block of {count} floats")
        self._pos = stop
        if not keep:
            return None
        values = np.frombuffer(data[start:stop], dtype="<f4").astype(np.float32)
        if not np.isfinite(values).all():
            raise ModelFormatError(f"{what}: NaN or infinite weight")
        return values

    def at_end(self) -> bool:
        data, pos = self._data, self._pos
        while pos < len(data) and data[pos] in _WHITESPACE:
            pos += 1
        return pos >= len(data)


class ByteSink(Protocol):
    def write(self, data: bytes, /) -> int: ...


class TokenWriter:
    """Writes what TokenReader reads, in binary form (`@BIN@` + float32 little-endian), as KataGo's exporter does."""

    def __init__(self, out: ByteSink) -> None:
        self._out = out
        self.floats_written = 0

    def line(self, *values: object) -> None:
        for value in values:
            self._out.write(f"{value}\n".encode("ascii"))

    def floats(self, values: np.ndarray) -> None:
        flat = np.ascontiguousarray(values, dtype="<f4").reshape(-1)
        self._out.write(b"@BIN@")
        self._out.write(flat.tobytes())
        self._out.write(b"\n")
        self.floats_written += flat.size
