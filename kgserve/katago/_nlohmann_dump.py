"""nlohmann::json 3.8's `dump()` as KataGo prints JSON: compact, keys sorted, UTF-8 kept, doubles as nlohmann
writes them (`1e+15`, where Python writes `1000000000000000.0`), integers past int64/uint64 as the doubles nlohmann
parsed them into; no recursion, so any depth."""

from __future__ import annotations

import math
from json.encoder import encode_basestring
from typing import Any

from kgserve.katago._nlohmann_lexer import INT64_MIN, UINT64_END

__all__ = ["dump"]


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
        if INT64_MIN <= value < UINT64_END:
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
