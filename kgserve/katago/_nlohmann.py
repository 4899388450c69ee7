"""nlohmann::json 3.8, the JSON library inside KataGo v1.17.2, as KataGo's analysis engine uses it.

- `parse(line)`: `json::parse` of a request line, faithfully: the same values (integers beyond int64/uint64
  become doubles, the last of duplicate keys wins, a NUL byte outside a string ends the input), the same
  exception texts (`[json.exception.parse_error.101] parse error at line 1, column 2: ...`, with what the lexer
  quotes as the last token read), and no recursion, so any depth parses.
- `loads(line)`: the same result, through Python's C decoder when it can vouch for it (most lines), else `parse`.
- `dump(value)`: `json::dump()`: compact, keys sorted, UTF-8 kept, doubles in nlohmann's format (`1e+15`, not
  Python's `1000000000000000.0`); no recursion either.
- `nlohmann_int`, `nlohmann_int64`: what `get<int>()` and `get<int64_t>()` give for a parsed number.
"""

from __future__ import annotations

import json
import math
import re
from json.encoder import encode_basestring
from typing import Any

__all__ = [
    "NlohmannError",
    "dump",
    "loads",
    "nlohmann_error",
    "nlohmann_int",
    "nlohmann_int64",
    "number_value",
    "parse",
]

_EOF = -1
_U64_END = 1 << 64
_I64_MIN = -(1 << 63)
_INT32_MIN = -(1 << 31)
_CONTROL_NAMES = (
    "NUL SOH STX ETX EOT ENQ ACK BEL BS HT LF VT FF CR SO SI DLE DC1 DC2 DC3 DC4 NAK SYN ETB CAN EM SUB ESC FS GS RS US"
).split()
_SHORT_ESCAPES = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"}
_ESCAPED = {ord('"'): '"', ord("\\"): "\\", ord("/"): "/", ord("b"): "\b", ord("f"): "\f", ord("n"): "\n"}
_ESCAPED.update({ord("r"): "\r", ord("t"): "\t"})
_WS = re.compile(rb"[ \t\n\r]*")
_WS_BYTES = frozenset(b" \t\n\r")
_OPENING_RUN = re.compile(rb"\[*")
_PLAIN = re.compile(rb'[^"\\\x00-\x1f\x80-\xff]*')  # string bytes that need no attention
_HEX = b"0123456789abcdefABCDEF"
_DIGITS = re.compile(rb"[0-9]*")
# (first byte range, ranges of the continuation bytes): the lexer's table of well-formed UTF-8
_UTF8: list[tuple[int, int, tuple[tuple[int, int], ...]]] = [
    (0xC2, 0xDF, ((0x80, 0xBF),)),
    (0xE0, 0xE0, ((0xA0, 0xBF), (0x80, 0xBF))),
    (0xE1, 0xEC, ((0x80, 0xBF), (0x80, 0xBF))),
    (0xED, 0xED, ((0x80, 0x9F), (0x80, 0xBF))),
    (0xEE, 0xEF, ((0x80, 0xBF), (0x80, 0xBF))),
    (0xF0, 0xF0, ((0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF))),
    (0xF1, 0xF3, ((0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF))),
    (0xF4, 0xF4, ((0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF))),
]
_STRUCTURAL = {ord("["): "'['", ord("]"): "']'", ord("{"): "'{'", ord("}"): "'}'", ord(":"): "':'", ord(","): "','"}
_LITERALS: dict[int, tuple[bytes, str, bool | None]] = {
    ord("t"): (b"true", "true literal", True),
    ord("f"): (b"false", "false literal", False),
    ord("n"): (b"null", "null literal", None),
}
_VALUE_START = "'[', '{', or a literal"
_PARSE_ERROR = "<parse error>"
_END = "end of input"


class NlohmannError(ValueError):
    """nlohmann's exception text (`e.what()`) for a line it cannot parse."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def number_value(text: str) -> int | float:
    """A number literal as nlohmann stores it: int64 or uint64 when it is an integer that fits, else a double."""
    if "." not in text and "e" not in text and "E" not in text and len(text) <= 20:
        value = int(text)
        if _I64_MIN <= value < _U64_END:
            return value
    return float(text)


class _Lexer:
    """nlohmann's lexer over one line. `pos` counts the characters read (`chars_read_total`; reads past the end
    return EOF and still count); the token string it quotes in errors is every byte read since the last string
    or number began (literals, separators and whitespace do not reset it)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.end = len(data)
        self.pos = 0
        self.token_start = 0
        self.error = ""
        self.value: Any = None

    def get(self) -> int:
        self.pos += 1
        return self.data[self.pos - 1] if self.pos <= self.end else _EOF

    def opening_run(self) -> int:
        """Read the '[' bytes right at the current position; how many."""
        start = self.pos
        self.pos = _OPENING_RUN.match(self.data, start).end()  # type: ignore[union-attr]
        return self.pos - start

    def take(self, char: int) -> bool:
        """Read `char` when it is right at the current position."""
        if self.pos < self.end and self.data[self.pos] == char:
            self.pos += 1
            return True
        return False

    def token_string(self) -> str:
        text = self.data[self.token_start : min(self.pos, self.end)].decode("utf-8", errors="replace")
        return "".join(f"<U+{ord(c):04X}>" if ord(c) <= 0x1F else c for c in text)

    def position(self) -> str:
        read = min(self.pos, self.end)
        line_start = self.data.rfind(b"\n", 0, read) + 1
        lines = self.data.count(b"\n", 0, read)
        return f"at line {lines + 1}, column {self.pos - line_start}"

    def fail(self, message: str) -> str:
        self.error = message
        return _PARSE_ERROR

    def scan(self) -> str:
        if self.pos == 0 and self.end and self.data[0] == 0xEF:  # skip_bom
            self.pos = 1
            if not (self.get() == 0xBB and self.get() == 0xBF):
                return self.fail("invalid BOM; must be 0xEF 0xBB 0xBF if given")
        pos = self.pos
        if pos < self.end and self.data[pos] in _WS_BYTES:
            pos = _WS.match(self.data, pos).end()  # type: ignore[union-attr]
        self.pos = pos + 1
        char = self.data[pos] if pos < self.end else _EOF
        structural = _STRUCTURAL.get(char)
        if structural is not None:
            return structural
        if char == 0x22:
            return self._string()
        if char == 0x2D or 0x30 <= char <= 0x39:
            return self._number()
        if char in (0, _EOF):  # a NUL byte ends the input too
            return _END
        if char in _LITERALS:
            literal, name, self.value = _LITERALS[char]
            for expected in literal[1:]:
                if self.get() != expected:
                    return self.fail("invalid literal")
            return name
        return self.fail("invalid literal")

    def _string(self) -> str:
        self.token_start = self.pos - 1
        pieces: list[str] = []
        start = self.pos
        while True:
            self.pos = _PLAIN.match(self.data, self.pos).end()  # type: ignore[union-attr]
            char = self.get()
            if char == 0x22:
                pieces.append(self.data[start : self.pos - 1].decode("utf-8"))
                self.value = "".join(pieces)
                return "string literal"
            if char == 0x5C:
                pieces.append(self.data[start : self.pos - 1].decode("utf-8"))
                escaped = self._escape()
                if escaped is None:
                    return _PARSE_ERROR
                pieces.append(escaped)
                start = self.pos
            elif char == _EOF:
                return self.fail("invalid string: missing closing quote")
            elif char <= 0x1F:
                short = f" or {_SHORT_ESCAPES[char]}" if char in _SHORT_ESCAPES else ""
                name = f"U+{char:04X} ({_CONTROL_NAMES[char]})"
                return self.fail(f"invalid string: control character {name} must be escaped to \\u{char:04X}{short}")
            elif not self._utf8(char):
                return self.fail("invalid string: ill-formed UTF-8 byte")

    def _utf8(self, lead: int) -> bool:
        for low, high, ranges in _UTF8:
            if low <= lead <= high:
                return all(lo <= self.get() <= hi for lo, hi in ranges)
        return False

    def _escape(self) -> str | None:
        char = self.get()
        if char in _ESCAPED:
            return _ESCAPED[char]
        if char != ord("u"):
            self.fail("invalid string: forbidden character after backslash")
            return None
        code = self._hex4()
        if code is None:
            return None
        if 0xD800 <= code <= 0xDBFF:
            if self.get() == 0x5C and self.get() == ord("u"):
                low = self._hex4()
                if low is None:
                    return None
                if 0xDC00 <= low <= 0xDFFF:
                    return chr(((code - 0xD800) << 10) + (low - 0xDC00) + 0x10000)
            self.fail("invalid string: surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF")
            return None
        if 0xDC00 <= code <= 0xDFFF:
            self.fail("invalid string: surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF")
            return None
        return chr(code)

    def _hex4(self) -> int | None:
        digits = self.data[self.pos : self.pos + 4]
        for index in range(4):
            if index >= len(digits) or digits[index] not in _HEX:
                self.pos += index + 1  # the offending character was read
                self.fail("invalid string: '\\u' must be followed by 4 hex digits")
                return None
        self.pos += 4
        return int(digits, 16)

    def _number(self) -> str:
        """scan_number's state machine; on success `pos` is after the number (the next character is ungot)."""
        self.token_start = self.pos - 1
        char = self.data[self.token_start]
        if char == 0x2D:
            char = self.get()
            if not 0x30 <= char <= 0x39:
                return self.fail("invalid number; expected digit after '-'")
        char = self.get() if char == 0x30 else self._digits()
        if char == 0x2E:
            if not 0x30 <= self.get() <= 0x39:
                return self.fail("invalid number; expected digit after '.'")
            char = self._digits()
        if char in (0x45, 0x65):
            char = self.get()
            if char in (0x2B, 0x2D):
                if not 0x30 <= self.get() <= 0x39:
                    return self.fail("invalid number; expected digit after exponent sign")
            elif not 0x30 <= char <= 0x39:
                return self.fail("invalid number; expected '+', '-', or digit after exponent")
            self._digits()
        self.pos -= 1  # unget
        self.value = number_value(self.data[self.token_start : self.pos].decode("ascii"))
        return "number literal"

    def _digits(self) -> int:
        """Read digits; returns the first character after them (read)."""
        self.pos = _DIGITS.match(self.data, self.pos).end()  # type: ignore[union-attr]
        return self.get()


class _Parser:
    """parser::sax_parse_internal with the DOM builder: an explicit stack instead of recursion."""

    def __init__(self, data: bytes) -> None:
        self.lexer = _Lexer(data)
        self.last = ""

    def next(self) -> str:
        self.last = self.lexer.scan()
        return self.last

    def error(self, expected: str | None, context: str) -> NlohmannError:
        if self.last == _PARSE_ERROR:
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
        if self.next() != _END:
            raise self.error(_END, "value")
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
            elif token == _PARSE_ERROR:
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


def _float_text(value: float) -> str:
    """dump_float: Grisu2 digits (Python's repr has the same shortest digits), exponent form from 10^15 on
    (Python's repr switches at 10^16) and below 10^-4, at least two exponent digits."""
    text = repr(value)
    if 1e15 <= abs(value) < 1e16:
        sign = "-" if value < 0 else ""
        digits = text.lstrip("-").split(".")[0] + text.split(".")[1]
        digits = digits.rstrip("0")
        text = f"{sign}{digits[0]}{'.' + digits[1:] if len(digits) > 1 else ''}e+15"
    return text


def _scalar_text(value: Any) -> str:
    if isinstance(value, str):
        return encode_basestring(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        if _I64_MIN <= value < _U64_END:
            return str(value)
        value = float(value)  # nlohmann never holds a wider integer: it parsed it as a double
    if isinstance(value, float):
        return _float_text(value) if math.isfinite(value) else "null"
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dump(value: Any, default: Any = None) -> str:
    """`json::dump()`: compact, keys sorted, UTF-8 kept. `default(obj)` turns other objects into JSON values."""
    out: list[str] = []
    emit = out.append
    # work items: a value to write, or a _Text to copy (a separator, a closing bracket, a key)
    work: list[Any] = [value]
    pop, push = work.pop, work.append
    while work:
        item = pop()
        kind = type(item)
        if kind is _Text:
            emit(item.text)
        elif kind is list or kind is tuple:
            if not item:
                emit("[]")
                continue
            emit("[")
            push(_CLOSE_ARRAY)
            for index in range(len(item) - 1, 0, -1):
                push(item[index])
                push(_COMMA)
            push(item[0])
        elif kind is dict:
            if not item:
                emit("{}")
                continue
            emit("{")
            push(_CLOSE_OBJECT)
            keys = sorted(item)
            for index in range(len(keys) - 1, -1, -1):
                push(item[keys[index]])
                push(_Text(("," if index else "") + encode_basestring(keys[index]) + ":"))
        elif default is not None and not isinstance(item, str | int | float | type(None) | dict | list):
            push(default(item))
        else:
            emit(_scalar_text(item))
    return "".join(out)


class _Text:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


_CLOSE_OBJECT, _CLOSE_ARRAY, _COMMA = _Text("}"), _Text("]"), _Text(",")


def nlohmann_int(value: object) -> int:
    """What `json.get<int>()` gives for a parsed value in KataGo (nlohmann 3.8 on x86-64).

    Integers (int64 or uint64) are cast, wrapping (4294967296 -> 0); doubles truncate toward zero, and out of
    int range the x86 conversion gives INT_MIN. Booleans give 0 or 1. Anything else raises TypeError
    (nlohmann's type_error 302).
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        if _I64_MIN <= value < _U64_END:
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
    if isinstance(value, int) and _I64_MIN <= value < _U64_END:
        return (value - _U64_END) if value >= 1 << 63 else value
    truncated = int(value)
    return truncated if _I64_MIN <= truncated < 1 << 63 else _I64_MIN
