"""The error texts of nlohmann::json (the JSON library inside KataGo) for a line it cannot parse.

KataGo answers an unparsable request line with `e.what() + " - could not parse input line as json
request: " + line`. Python's json module accepts and rejects slightly different inputs and words its
errors differently, so this module re-runs nlohmann's lexer and parser rules over the line's bytes to
reproduce its message (`[json.exception.parse_error.101] parse error at line 1, column 2: ...`).
It is only called on the error path; valid lines never pay for it.
"""

from __future__ import annotations

__all__ = ["nlohmann_error", "nlohmann_int"]

_WS = b" \t\n\r"
_CONTROL_NAMES = (
    "NUL SOH STX ETX EOT ENQ ACK BEL BS HT LF VT FF CR SO SI DLE DC1 DC2 DC3 DC4 NAK SYN ETB CAN EM SUB ESC FS GS RS US"
).split()
_SHORT_ESCAPES = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"}
_VALUE_START = "'[', '{', or a literal"


class _Fail(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Lexer:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.line = 0
        self.column = 0
        self.token = bytearray()
        self.error = ""
        self.number_text = ""
        self._unget_pending = False

    def get(self) -> int:
        self.column += 1
        if self.pos < len(self.data):
            char = self.data[self.pos]
            self.pos += 1
            self.token.append(char)
            if char == 0x0A:
                self.line += 1
                self.column = 0
            return char
        self.pos += 1
        return -1

    def unget(self) -> None:
        self.pos -= 1
        self.column -= 1
        if self.pos < len(self.data):
            if self.data[self.pos] == 0x0A:
                self.line -= 1
            if self.token:
                self.token.pop()

    def token_string(self) -> str:
        text = bytes(self.token).decode("utf-8", errors="replace")
        return "".join(f"<U+{ord(c):04X}>" if ord(c) <= 0x1F else c for c in text)

    def scan(self) -> str:
        """Return the next token type name, or "parse error" with self.error set."""
        while self.pos < len(self.data) and self.data[self.pos] in _WS:
            self.get()
        self.token = bytearray()
        char = self.get()
        if char == -1:
            return "end of input"
        structural = {
            ord("["): "'['",
            ord("]"): "']'",
            ord("{"): "'{'",
            ord("}"): "'}'",
            ord(":"): "':'",
            ord(","): "','",
        }
        if char in structural:
            return structural[char]
        if char == ord('"'):
            return self._scan_string()
        if char == ord("-") or ord("0") <= char <= ord("9"):
            return self._scan_number(char)
        for literal, name in ((b"true", "true literal"), (b"false", "false literal"), (b"null", "null literal")):
            if char == literal[0]:
                for expected in literal[1:]:
                    if self.get() != expected:
                        self.error = "invalid literal"
                        return "parse error"
                return name
        self.error = "invalid literal"
        return "parse error"

    def _scan_string(self) -> str:
        while True:
            char = self.get()
            if char == -1:
                self.error = "invalid string: missing closing quote"
                return "parse error"
            if char == ord('"'):
                return "string literal"
            if char == ord("\\"):
                if not self._scan_escape():
                    return "parse error"
            elif char <= 0x1F:
                hexcode = f"U+{char:04X}"
                short = f" or {_SHORT_ESCAPES[char]}" if char in _SHORT_ESCAPES else ""
                self.error = (
                    f"invalid string: control character {hexcode} ({_CONTROL_NAMES[char]}) "
                    f"must be escaped to \\u{char:04X}{short}"
                )
                return "parse error"
            elif char >= 0x80 and not self._scan_utf8(char):
                self.error = "invalid string: ill-formed UTF-8 byte"
                return "parse error"

    def _scan_escape(self) -> bool:
        char = self.get()
        if char in b'"\\/bfnrt':
            return True
        if char != ord("u"):
            self.error = "invalid string: forbidden character after backslash"
            return False
        code = self._hex4()
        if code is None:
            return False
        if 0xD800 <= code <= 0xDBFF:
            if self.get() == ord("\\") and self.get() == ord("u"):
                low = self._hex4()
                if low is None:
                    return False
                if 0xDC00 <= low <= 0xDFFF:
                    return True
            self.error = "invalid string: surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF"
            return False
        if 0xDC00 <= code <= 0xDFFF:
            self.error = "invalid string: surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF"
            return False
        return True

    def _hex4(self) -> int | None:
        value = 0
        for _ in range(4):
            char = self.get()
            digit = chr(char) if char != -1 else ""
            if digit == "" or digit not in "0123456789abcdefABCDEF":
                self.error = "invalid string: '\\u' must be followed by 4 hex digits"
                return None
            value = value * 16 + int(digit, 16)
        return value

    def _scan_utf8(self, lead: int) -> bool:
        if 0xC2 <= lead <= 0xDF:
            ranges = [(0x80, 0xBF)]
        elif lead == 0xE0:
            ranges = [(0xA0, 0xBF), (0x80, 0xBF)]
        elif 0xE1 <= lead <= 0xEC or 0xEE <= lead <= 0xEF:
            ranges = [(0x80, 0xBF), (0x80, 0xBF)]
        elif lead == 0xED:
            ranges = [(0x80, 0x9F), (0x80, 0xBF)]
        elif lead == 0xF0:
            ranges = [(0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)]
        elif 0xF1 <= lead <= 0xF3:
            ranges = [(0x80, 0xBF)] * 3
        elif lead == 0xF4:
            ranges = [(0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)]
        else:
            return False
        for low, high in ranges:
            char = self.get()
            if not low <= char <= high:
                return False
        return True

    def _scan_number(self, first: int) -> str:
        def digits() -> int:
            count = 0
            while True:
                char = self.get()
                if not ord("0") <= char <= ord("9"):
                    return char
                count += 1

        char = first
        if char == ord("-"):
            char = self.get()
            if not ord("0") <= char <= ord("9"):
                self.error = "invalid number; expected digit after '-'"
                return "parse error"
        char = self.get() if char == ord("0") else digits()
        if char == ord("."):
            char = self.get()
            if not ord("0") <= char <= ord("9"):
                self.error = "invalid number; expected digit after '.'"
                return "parse error"
            char = digits()
        if char in (ord("e"), ord("E")):
            char = self.get()
            if char in (ord("+"), ord("-")):
                char = self.get()
                if not ord("0") <= char <= ord("9"):
                    self.error = "invalid number; expected digit after exponent sign"
                    return "parse error"
            elif not ord("0") <= char <= ord("9"):
                self.error = "invalid number; expected '+', '-', or digit after exponent"
                return "parse error"
            char = digits()
        self.unget()
        self.number_text = bytes(self.token).decode("ascii")
        return "number literal"


class _Parser:
    def __init__(self, data: bytes) -> None:
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        self.lexer = _Lexer(data)
        self.last = ""

    def fail(self, expected: str | None, context: str) -> _Fail:
        if self.last == "parse error":
            detail = f"{self.lexer.error}; last read: '{self.lexer.token_string()}'"
        else:
            detail = f"unexpected {self.last}"
        if expected:
            detail += f"; expected {expected}"
        where = f"at line {self.lexer.line + 1}, column {self.lexer.column}"
        return _Fail(
            f"[json.exception.parse_error.101] parse error {where}: syntax error while parsing {context} - {detail}"
        )

    def next(self) -> str:
        self.last = self.lexer.scan()
        return self.last

    def parse(self) -> None:
        self.next()
        self.value()
        if self.next() != "end of input":
            raise self.fail("end of input", "value")

    def value(self) -> None:
        token = self.last
        if token == "'{'":
            if self.next() == "'}'":
                return
            while True:
                if self.last != "string literal":
                    raise self.fail("string literal", "object key")
                if self.next() != "':'":
                    raise self.fail("':'", "object separator")
                self.next()
                self.value()
                if self.next() == "','":
                    self.next()
                    continue
                if self.last == "'}'":
                    return
                raise self.fail("'}'", "object")
        if token == "'['":
            if self.next() == "']'":
                return
            while True:
                self.value()
                if self.next() == "','":
                    self.next()
                    continue
                if self.last == "']'":
                    return
                raise self.fail("']'", "array")
        if token == "number literal":
            text = self.lexer.number_text
            if any(c in text for c in ".eE") and float(text) in (float("inf"), float("-inf")):
                raise _Fail(f"[json.exception.out_of_range.406] number overflow parsing '{text}'")
            return
        if token in ("string literal", "true literal", "false literal", "null literal"):
            return
        if token == "parse error":
            raise self.fail(None, "value")
        raise self.fail(_VALUE_START, "value")


def nlohmann_error(line: bytes) -> str | None:
    """nlohmann's exception text for this line, or None when nlohmann would parse it."""
    try:
        _Parser(line).parse()
    except _Fail as failure:
        return failure.message
    return None


_INT32_MIN = -(1 << 31)


def _to_int32(value: int) -> int:
    """C++ `static_cast<int>` of a 64-bit integer: keep the low 32 bits, two's complement."""
    low = value & 0xFFFFFFFF
    return low - (1 << 32) if low >= 1 << 31 else low


def nlohmann_int(value: object) -> int:
    """What `json.get<int>()` gives for a parsed value in KataGo (nlohmann 3.8 on x86-64).

    Integers nlohmann stores as int64 or uint64 are cast (wrapping: 4294967296 -> 0); bigger ones it
    stores as a double. Doubles truncate toward zero; out of int range the x86 conversion gives
    INT_MIN. Booleans give 0 or 1. Anything else raises TypeError (nlohmann's type_error 302).
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        if -(1 << 63) <= value < 1 << 64:
            return _to_int32(value)
        value = float(value)
    if isinstance(value, float):
        truncated = int(value)  # JSON has no inf or nan (nlohmann refuses them at parse time)
        return truncated if _INT32_MIN <= truncated < 1 << 31 else _INT32_MIN
    raise TypeError(f"type must be number, but is {type(value).__name__}")
