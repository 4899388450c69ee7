"""How KataGo v1.17.2 reads a query's `priority` and `priorities` (cpp/command/analysis.cpp), as pure functions.

- `priority`: parseInteger: an integer (nlohmann's int64 or uint64; a double or a boolean is refused), read as
  int64 (a uint64 wraps: 18446744073709551615 is -1), then refused outside +-PRIORITY_LIMIT.
- `priorities`: `get<vector<int64_t>>`: numbers only (a boolean is refused), doubles truncated toward zero (out
  of int64's range: INT64_MIN), integers wrapped as above; any value outside +-PRIORITY_LIMIT is refused.

kgserve's priority classes (kgserve.admission.priority) map what KataGo would read, so no value KataGo accepts
escapes its class's band; the simulated engine refuses with the same bound.
"""

from __future__ import annotations

from typing import Any

from kgserve.katago._nlohmann import nlohmann_int64

__all__ = ["PRIORITY_LIMIT", "read_priorities", "read_priority"]

PRIORITY_LIMIT = 0x3FFFFFFFFFFFFFFF  # 2^62 - 1: KataGo refuses a priority beyond +- this


def read_priority(value: Any) -> int | None:
    """The priority KataGo searches with for this `priority` value; None when KataGo refuses it."""
    if type(value) is not int:  # a bool is no integer to nlohmann; an integer of 2^64 or more parses as a double
        return None
    read = nlohmann_int64(value)
    return read if -PRIORITY_LIMIT <= read <= PRIORITY_LIMIT else None


def read_priorities(value: Any) -> list[int] | None:
    """The priorities KataGo reads from this `priorities` value; None when it refuses any of them."""
    if not isinstance(value, list) or not all(type(item) in (int, float) for item in value):
        return None
    read = [nlohmann_int64(item) for item in value]
    return read if all(-PRIORITY_LIMIT <= item <= PRIORITY_LIMIT for item in read) else None
