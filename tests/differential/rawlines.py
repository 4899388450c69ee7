"""Request lines as a hostile or broken client writes them, for the `lines` category of the differential check.

KataGo answers most of them with one error line without an id (`could not parse input line as json request`,
`valid json but was not an object`, `must have a string "id" field`, an unknown action); a query cut short by a
NUL byte, or nested thousands of levels deep in a field KataGo does not read, is answered under its id.

Never generated: a line KataGo aborts on (SIGABRT: nlohmann's type_error 316 when it prints its error line):
one with invalid UTF-8 that it must quote back, and one whose parse stops inside a multi-byte character (`[é]`:
the lexer quotes the lead byte alone as the last token read). The generator asks kgserve's port of nlohmann's
parser which lines those are; invalid UTF-8 after a NUL byte that ends a valid query is generated (KataGo never
reads it). Non-objects are nested at most a few thousand levels: KataGo prints them back with a recursive
dump() that overflows its stack near 100,000 levels.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from kgserve.katago._nlohmann import nlohmann_error

__all__ = ["raw_line"]

# bytes a mutation inserts or puts in place of another: structure, escapes, literals, numbers, whitespace,
# control characters (NUL first: it ends nlohmann's input outside a string), valid multi-byte UTF-8
NASTY: list[bytes] = [
    b"\x00", b"\x00", b"\x01", b"\x08", b"\x1f", b"\x7f", b" ", b"\t", b"\r", b"\x0b", b"\x0c",
    b'"', b"\\", b"\\u", b"\\u12", b"\\u12g4", b"\\ud800", b"\\udc00", b"\\ud800\\udc00", b"\\ud800x",
    b"\\ud800\\u0041",
    b"\\x", b"\\n", b"\\/", b"{", b"}", b"[", b"]", b":", b",", b"-", b".", b"e", b"E+", b"0", b"01", b"-0",
    b"tru", b"nul", b"fals", b"true", b"null", b"NaN", b"Infinity", b"-Infinity",
    "\ufeff".encode(), "\u00e9".encode(), "\u20ac".encode(), "\U0001f600".encode(), b"'", b"/", b"#", b"x",
    b"1e400", b"-1e400", b"1.5e", b"1.e5", b"2e+", b"-.5", b"+1", b"0x10", b"9" * 320,
]  # fmt: skip
# in the id's own text only bytes that cannot leave a valid line with another id
ID_SAFE = [b"\x00", b"\x01", b"\x1f", b'"', b"\x00x"]
NUMBER_TEXTS = [
    "0", "-0", "1", "-1", "0.0", "-0.0", "1.0", "1E5", "1e+05", "1e-05", "0.0001", "0.1e1", "123e-2", "100e-2",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
    "18446744073709551615", "18446744073709551616", "-18446744073709551616", "1" + "0" * 30, "9" * 300,
    "1e15", "1.5e15", "123456789012345.6", "999999999999999.9", "1234567890123456", "1e16", "1e21", "1e22",
    "0.3333333333333333", "5e-324", "2.5e-324", "1e-400", "1.7976931348623157e308", "4.0e18", "-4.7e18", "1e19",
]  # fmt: skip
STRING_TEXTS = [
    '""',
    '"a"',
    '"\\u00e9t\\u00e9"',
    '"\\ud83d\\ude00"',
    '"tab\\there"',
    '"\\"q\\""',
    '"\\u0000"',
    '"/\\/"',
]
NOT_ID = ["{}", '{"id":5}', '{"id":null}', '{"ID":"x"}', '{"id":["x"]}', '{"id":true}', '{"id":{"a":"b"}}']
ACTIONS = ["foo", "", "Query_version", "terminate_al", "query_version ", "clearcache"]


def _json_value(rng: random.Random, depth: int) -> str:
    """A JSON text of numbers, strings and literals, nested up to `depth`, spaced at random."""
    roll = rng.random()
    space = rng.choice(["", "", " ", "\t", "  "])
    if depth <= 0 or roll < 0.45:
        return rng.choice([*NUMBER_TEXTS, *NUMBER_TEXTS, *STRING_TEXTS, "true", "false", "null"])
    items = [_json_value(rng, depth - 1) for _ in range(rng.randint(0, 4))]
    if roll < 0.75:
        return "[" + space + ("," + space).join(items) + space + "]"
    keys = [json.dumps(rng.choice(["a", "b", "B", "id", "\u00e9", "z", "", "a"])) for _ in items]
    return "{" + ",".join(f"{k}{space}:{space}{v}" for k, v in zip(keys, items, strict=True)) + "}"


def _deep(rng: random.Random) -> bytes:
    depth = rng.choice([50, 900, 1000, 1001, 3000, 4000])
    kind = rng.random()
    if kind < 0.4:
        return b"[" * depth + b"]" * depth
    if kind < 0.6:
        return b'{"a":' * depth + b"1" + b"}" * depth
    if kind < 0.8:
        return b"[" * depth  # unterminated
    broken = b"[" * depth + b"1," + b"]" * depth
    return broken if rng.random() < 0.5 else b"[" * depth + b"]" * (depth + 1)


def _char_starts(line: bytes, start: int) -> list[int]:
    """Positions from `start` on that begin a UTF-8 character (a cut or insertion there keeps the rest valid)."""
    return [i for i in range(start, len(line) + 1) if i == len(line) or not 0x80 <= line[i] <= 0xBF]


def _mutate(rng: random.Random, line: bytes, id_end: int) -> bytes:
    """One to three cuts, insertions, replacements or deletions; the id's text only gets ID_SAFE bytes."""
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        op = rng.random()
        if op < 0.15:
            return line[: rng.choice(_char_starts(line, 0))]
        in_id = rng.random() < 0.1
        positions = [p for p in _char_starts(line, 0) if p < id_end] if in_id else _char_starts(line, id_end)
        at = rng.choice(positions)
        token = rng.choice(ID_SAFE if in_id else NASTY)
        if op < 0.7 or in_id:  # nothing is deleted from the id's text: another case could have that id
            line = line[:at] + token + line[at:]
        elif at < len(line) and line[at] < 0x80:
            line = line[:at] + (token if op < 0.85 else b"") + line[at + 1 :]
    return line


def _query_line(case_id: str, body: dict[str, Any]) -> tuple[bytes, int]:
    """The query with its id first (so mutations after `id_end` cannot change which id KataGo reads)."""
    prefix = '{"id":' + json.dumps(case_id) + ","
    rest = json.dumps({k: v for k, v in body.items() if k != "id"}, ensure_ascii=False)[1:]
    return (prefix + rest).encode("utf-8"), len(prefix)


def katago_aborts(line: bytes) -> bool:
    """Whether KataGo's error line for `line` would hold invalid UTF-8 (it then aborts instead of answering)."""
    trimmed = line.strip(b" \t\r\n\v\f")
    message = nlohmann_error(trimmed)
    if message is None:
        return False  # parsed: the query's own texts quote only strings, which nlohmann checked
    try:
        trimmed.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return "\ufffd" in message  # the last token read ends inside a character


def raw_line(case_id: str, rng: random.Random, make_body: Callable[[], dict[str, Any]]) -> str:
    """One line for the `lines` category (as text; bytes that are not UTF-8 kept as surrogate escapes)."""
    while True:
        out = _raw_bytes(case_id, rng, make_body)
        if not katago_aborts(out):
            return out.decode("utf-8", errors="surrogateescape")


def _raw_bytes(case_id: str, rng: random.Random, make_body: Callable[[], dict[str, Any]]) -> bytes:
    roll = rng.random()
    if roll < 0.5:
        line, id_end = _query_line(case_id, make_body())
        out = _mutate(rng, line, id_end)
    elif roll < 0.58:  # a valid query, a NUL byte, then junk nlohmann never reads
        line, _ = _query_line(case_id, make_body())
        out = line + b"\x00" + rng.choice([b"", b"junk", b"}", b"\xff\xfe", b'{"id":"other"}', b"\x00"])
    elif roll < 0.63:  # a valid query with a field nested deep (KataGo reads its type only)
        body = make_body()
        depth = rng.choice([100, 1000, 5000, 20000])
        body["deep"] = 0
        line, _ = _query_line(case_id, body)
        out = line.replace(b'"deep": 0', b'"deep": ' + b"[" * depth + b"]" * depth)
    elif roll < 0.78:
        out = _json_value(rng, rng.randint(0, 4)).encode("utf-8")
    elif roll < 0.84:
        out = _deep(rng)
    elif roll < 0.9:
        out = rng.choice(NOT_ID).encode()
    elif roll < 0.95:
        out = json.dumps({"id": case_id, "action": rng.choice(ACTIONS)}).encode()
    else:
        out = rng.choice([b"\xef\xbb\xbf", b"\x00", b" \x00 ", b"\x0b", b"\xef\xbb\xbf   {", b"\xef\xbb\xbf[1]"])
    if rng.random() < 0.1:
        out = rng.choice([b" ", b"\t", b"\xef\xbb\xbf", b"\x0c"]) + out + rng.choice([b"", b" ", b"\r", b"\x0b"])
    return out
