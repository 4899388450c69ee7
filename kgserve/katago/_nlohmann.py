"""nlohmann::json 3.8, the JSON library inside KataGo v1.17.2, as KataGo's analysis engine uses it.

- `parse(line)`: `json::parse` of a request line, faithfully: the same values (integers beyond int64/uint64
  become doubles, the last of duplicate keys wins, a NUL byte outside a string ends the input), the same
  exception texts (`[json.exception.parse_error.101] parse error at line 1, column 2: ...`, with what the lexer
  quotes as the last token read), and no recursion, so any depth parses.
- `loads(line)`: the same result, through Python's C decoder when it can vouch for it (most lines), else `parse`.
- `dump(value)` (in `_nlohmann_dump`): `json::dump()`: compact, keys sorted, UTF-8 kept, doubles in nlohmann's
  format (`1e+15`, not Python's `1000000000000000.0`); no recursion either. The lexer is `_nlohmann_lexer`.
- `nlohmann_int`, `nlohmann_int64`: what `get<int>()` and `get<int64_t>()` give for a parsed number.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from kgserve.katago._nlohmann_lexer import END, INT64_MIN, PARSE_ERROR, UINT64_END, Lexer, number_value

__all__ = [
    "NlohmannError",
    "loads",
    "nlohmann_error",
    "nlohmann_int",
    "nlohmann_int64",
    "parse",
    "python_decode",
]

_INT32_MIN = -(1 << 31)
_VALUE_START = "'[', '{', or a literal"


class NlohmannError(ValueError):
    """nlohmann's exception text (`e.what()`) for a line it cannot parse."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Parser:
    """parser::sax_parse_internal with the DOM builder: an explicit stack instead of recursion."""

    def __init__(self, data: bytes) -> None:
        self.lexer = Lexer(data)
        self.last = ""

    def next(self) -> str:
        self.last = self.lexer.scan()
        return self.last

    def error(self, expected: str | None, context: str) -> NlohmannError:
        if self.last == PARSE_ERROR:
            detail = f"{self.lexer.error}; last read: '{self.lexer.token_string()}'"
        else:
            detail = f"unexpected {self.last}"
        if expected:
            detail += f"; expected {expected}"
        where = self.lexer.position()
        syntax = f"syntax error while parsing {context} - {detail}"
        return NlohmannError(f"[json.exception.parse_error.101] parse error {where}: {syntax}")

    def parse(self) -> Any:
        self.next()
        value = self._value()
        if self.next() != END:
            raise self.error(END, "value")
        return value

    def _key(self, obj: dict[str, Any]) -> str:
        """After a string token: the key, with the name separator read and the next token scanned."""
        key: str = self.lexer.value
        if self.next() != "':'":
            raise self.error("':'", "object separator")
        obj[key] = None  # the key's place: std::map keeps its first insertion, the last value wins
        self.next()
        return key

    def _value(self) -> Any:
        # stack entries: (container, key of the value being parsed for an object, or None for an array)
        stack: list[tuple[Any, str | None]] = []
        while True:
            token = self.last
            if token == "'{'":
                if self.next() == "'}'":
                    value: Any = {}
                elif self.last != "string literal":
                    raise self.error("string literal", "object key")
                else:
                    obj: dict[str, Any] = {}
                    stack.append((obj, self._key(obj)))
                    continue
            elif token == "'['":
                # a run of '[' right after it (the shape of a deeply nested line): no scan per bracket
                stack += [([], None) for _ in range(self.lexer.opening_run())]
                if self.next() == "']'":
                    value = []
                else:
                    stack.append(([], None))
                    continue
            elif token in ("string literal", "true literal", "false literal", "null literal"):
                value = self.lexer.value
            elif token == "number literal":
                value = self.lexer.value
                if isinstance(value, float) and math.isinf(value):
                    text = self.lexer.token_string()
                    raise NlohmannError(f"[json.exception.out_of_range.406] number overflow parsing '{text}'")
            elif token == PARSE_ERROR:
                raise self.error(None, "value")
            else:
                raise self.error(_VALUE_START, "value")
            # a complete value: store it, then close every container it completes
            while True:
                if not stack:
                    return value
                container, key = stack[-1]
                if key is None:
                    container.append(value)
                    if self.lexer.take(0x5D):  # a ']' right after the value
                        self.last = "']'"
                    elif self.next() == "','":
                        self.next()
                        break
                    if self.last != "']'":
                        raise self.error("']'", "array")
                else:
                    container[key] = value
                    if self.next() == "','":
                        if self.next() != "string literal":
                            raise self.error("string literal", "object key")
                        stack[-1] = (container, self._key(container))
                        break
                    if self.last != "'}'":
                        raise self.error("'}'", "object")
                stack.pop()
                value = container


def parse(line: bytes) -> Any:
    """`json::parse(line)` as KataGo calls it; raises NlohmannError with nlohmann's text."""
    return _Parser(line).parse()


def nlohmann_error(line: bytes) -> str | None:
    """nlohmann's exception text for this line, or None when nlohmann parses it."""
    try:
        parse(line)
    except NlohmannError as failure:
        return failure.message
    return None


def _reject(text: str) -> Any:
    raise ValueError(text)


def _python_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(text)  # nlohmann: out_of_range.406
    return value


def _python_int(text: str) -> int | float:
    value = number_value(text)
    if isinstance(value, float) and math.isinf(value):
        raise ValueError(text)
    return value


# Python's C decoder with nlohmann's number rules; what it cannot vouch for goes to `parse`
_DECODER = json.JSONDecoder(parse_int=_python_int, parse_float=_python_float, parse_constant=_reject)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # Python accepts lone surrogates, nlohmann does not
_BOM = b"\xef\xbb\xbf"


def python_decode(text: bytes) -> Any:
    """The value of a JSON text (no BOM) by Python's C decoder with nlohmann's number rules; raises ValueError,
    UnicodeError or RecursionError where it cannot vouch that nlohmann reads the same (then ask `parse`)."""
    if b"\x00" in text or _SURROGATE_ESCAPE.search(text):
        raise ValueError("a NUL byte or a surrogate escape: parsed as nlohmann does")
    return _DECODER.decode(text.decode("utf-8"))


def loads(line: bytes) -> Any:
    """`parse(line)`, fast for the common line: raises NlohmannError as `parse` does."""
    try:
        return python_decode(line[3:] if line.startswith(_BOM) else line)
    except (ValueError, UnicodeError, RecursionError):
        return parse(line)


def nlohmann_int(value: object) -> int:
    """What `json.get<int>()` gives for a parsed value in KataGo (nlohmann 3.8 on x86-64).

    Integers (int64 or uint64) are cast, wrapping (4294967296 -> 0); doubles truncate toward zero, and out of
    int range the x86 conversion gives INT_MIN. Booleans give 0 or 1. Anything else raises TypeError
    (nlohmann's type_error 302).
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        if INT64_MIN <= value < UINT64_END:
            low = value & 0xFFFFFFFF
            return low - (1 << 32) if low >= 1 << 31 else low
        value = float(value)
    if isinstance(value, float):
        truncated = int(value)  # JSON has no inf or nan (nlohmann refuses them at parse time)
        return truncated if _INT32_MIN <= truncated < 1 << 31 else _INT32_MIN
    raise TypeError(f"type must be number, but is {type(value).__name__}")


def nlohmann_int64(value: int | float) -> int:
    """What `json.get<int64_t>()` gives for a parsed number: a uint64 wraps (18446744073709551615 -> -1); a
    double truncates toward zero, and out of int64 range the x86 conversion gives INT64_MIN."""
    if isinstance(value, int) and INT64_MIN <= value < UINT64_END:
        return (value - UINT64_END) if value >= 1 << 63 else value
    truncated = int(value)
    return truncated if INT64_MIN <= truncated < 1 << 63 else INT64_MIN
