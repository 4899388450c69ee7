"""nlohmann::json 3.8's lexer (KataGo v1.17.2's JSON library), over the bytes of one request line.

Its tokens are named as nlohmann names them in its error texts; `kgserve.katago._nlohmann` parses with them.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["END", "EOF", "INT64_MIN", "PARSE_ERROR", "UINT64_END", "Lexer", "number_value"]

EOF = -1
INT64_MIN = -(1 << 63)  # nlohmann keeps an integer as int64 or uint64 when it fits, else as a double
UINT64_END = 1 << 64
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
PARSE_ERROR = "<parse error>"
END = "end of input"


def number_value(text: str) -> int | float:
    """A number literal as nlohmann stores it: int64 or uint64 when it is an integer that fits, else a double."""
    if "." not in text and "e" not in text and "E" not in text and len(text) <= 20:
        value = int(text)
        if INT64_MIN <= value < UINT64_END:
            return value
    return float(text)


class Lexer:
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
        return self.data[self.pos - 1] if self.pos <= self.end else EOF

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
        return PARSE_ERROR

    def scan(self) -> str:
        if self.pos == 0 and self.end and self.data[0] == 0xEF:  # skip_bom
            self.pos = 1
            if not (self.get() == 0xBB and self.get() == 0xBF):
                return self.fail("invalid BOM; must be 0xEF 0xBB 0xBF if given")
        pos = self.pos
        if pos < self.end and self.data[pos] in _WS_BYTES:
            pos = _WS.match(self.data, pos).end()  # type: ignore[union-attr]
        self.pos = pos + 1
        char = self.data[pos] if pos < self.end else EOF
        structural = _STRUCTURAL.get(char)
        if structural is not None:
            return structural
        if char == 0x22:
            return self._string()
        if char == 0x2D or 0x30 <= char <= 0x39:
            return self._number()
        if char in (0, EOF):  # a NUL byte ends the input too
            return END
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
                    return PARSE_ERROR
                pieces.append(escaped)
                start = self.pos
            elif char == EOF:
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
