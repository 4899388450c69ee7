"""Is a KataGo analysis cfg one KataGo serves as written? Its keys and values checked with KataGo's own rules.

KataGo itself only warns `Unused key` about a misspelt key and runs with the default, and a build reads only the
keys of its backend (the CPU build never parses `nnMaxBatchSize`: `abc` there is served without a word). kgserve
refuses such a cfg at start instead: every key must be one `katago analysis` reads (kgserve.katago.cfg.is_known_key)
or named in `allow_unknown` (keys of a newer KataGo), and every value must pass the getter KataGo reads it with
(kgserve.katago.cfg_keys, generated from KataGo's source): an int / int64 read by C++ `istream >>` (`+4` and `04`
pass, `4.0`, `0x4` and `4e0` do not), a float or double (`.5`, `5.`, `1E+0` pass; `inf`, `nan`, `0x1p0`, `1.5f`
do not), a bool (`true` / `false`, any case), an enabled_t (`true`, `yes`, `1`, `auto`, ...), then the range.
Those forms were checked against the real KataGo v1.17.2 (docs/cfg.md).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping

from kgserve.katago.cfg import ALIASES, KATAGO_WHITESPACE, KNOWN_ANALYSIS_KEYS, is_known_key
from kgserve.katago.cfg_keys import RULES

__all__ = ["REQUIRED_KEYS", "cfg_problems", "rule_for", "suggest_key", "value_problem_for"]

# read by `katago analysis` with no default (cfg.getInt without cfg.contains): without them it cannot start
REQUIRED_KEYS = ("numAnalysisThreads", "numSearchThreads")
# Logger: "Cannot specify more than one of logFile and logDir and logDirDated in config"
_LOG_TARGETS = ("logFile", "logDir", "logDirDated")
# string keys KataGo parses further (Setup::parseReportAnalysisWinrates, lower-cased)
_CHOICES = {"reportAnalysisWinratesAs": frozenset({"b", "black", "w", "white", "sidetomove"})}
_ENABLED = frozenset({"1", "t", "true", "enabled", "y", "yes", "0", "f", "false", "disabled", "n", "no", "auto"})

_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INT_BITS = {"Int": (-(2**31), 2**31 - 1), "Int64": (-(2**63), 2**63 - 1), "UInt64": (0, 2**64 - 1)}
_FLOAT_MAX = {"Float": 3.4028234663852886e38, "Double": 1.7976931348623157e308}
# the indexed forms a key is also read under (kgserve.katago.cfg._INDEXED): stripped to find the base key's rule
_INDEX_SUFFIX = re.compile(r"(?:Model\d+)?(?:Thread\d+)?$|-\d+$|\d+$")


def suggest_key(key: str, known: Iterable[str] = KNOWN_ANALYSIS_KEYS) -> str | None:
    """The closest valid key (difflib), case-insensitively, or None."""
    by_lower = {k.lower(): k for k in known}
    match = difflib.get_close_matches(key.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[match[0]] if match else None


def rule_for(key: str) -> tuple[str, float | int | None, float | int | None] | None:
    """(getter, min, max) KataGo reads `key` with, or None for a key it reads as free text."""
    key = ALIASES.get(key, key)
    if key in RULES:
        return RULES[key]
    base = re.sub(r"^avoidSgf\d+Pattern", "avoidSgfPattern", key)
    base = _INDEX_SUFFIX.sub("", base, count=1)
    return RULES.get(base)


def _number(getter: str, text: str) -> float | int | None:
    if getter in _INT_BITS:
        if _INT.fullmatch(text) is None or (getter == "UInt64" and text.startswith("-")):
            return None
        lo, hi = _INT_BITS[getter]
        number = int(text)
        return number if lo <= number <= hi else None  # out of the C++ type: `>>` fails
    if _FLOAT.fullmatch(text) is None:
        return None
    value = float(text)
    return value if abs(value) <= _FLOAT_MAX[getter] else None  # overflow: `>>` fails


def value_problem_for(key: str, value: str) -> str | None:
    """What KataGo would refuse about `key = value`, or None: the getter's parse, then its range."""
    rule = rule_for(key)
    text = value.strip(KATAGO_WHITESPACE)
    if key in _CHOICES and text.lower() not in _CHOICES[key]:
        return f"{value!r} is not one of {'|'.join(sorted(_CHOICES[key]))}"
    if rule is None:
        return None
    getter, lo, hi = rule
    if getter == "Bool":
        return None if text.lower() in ("true", "false") else f"could not parse {value!r} as bool (true or false)"
    if getter == "Enabled":
        return None if text.lower() in _ENABLED else f"could not parse {value!r} as bool or auto"
    if getter not in _INT_BITS and getter not in _FLOAT_MAX:
        return None  # strings
    number = _number(getter, text)
    kind = {"Int": "int", "Int64": "int64", "UInt64": "uint64", "Float": "float", "Double": "double"}[getter]
    if number is None:
        return f"could not parse {value!r} as {kind}"
    if lo is not None and hi is not None and not lo <= number <= hi:
        return f"{value!r} is out of KataGo's range {lo} to {hi}"
    return None


def cfg_problems(values: Mapping[str, str], allow_unknown: Iterable[str] = ()) -> list[str]:
    """One sentence per thing `katago analysis` would refuse, ignore or misread in these cfg values (as parsed
    by kgserve.katago.cfg.read_cfg), each naming its key; empty when the cfg is served as written."""
    allowed = set(allow_unknown)
    problems: list[str] = []
    for key, value in values.items():
        if not is_known_key(key):
            if key in allowed:
                continue
            hint = suggest_key(key)
            problems.append(
                f"unknown key {key!r}: KataGo's analysis engine does not read it (it would only warn 'Unused key' "
                f"and run with its default){f'; did you mean {hint!r}?' if hint else ''}"
            )
            continue
        problem = value_problem_for(key, value)
        if problem:
            problems.append(f"key {key!r}: {problem}")
    for alias, name in ALIASES.items():
        if alias in values and name in values:
            problems.append(f"keys {alias!r} and {name!r}: KataGo refuses both in one cfg (one is an alias)")
    for key in REQUIRED_KEYS:
        names = [key] + [alias for alias, name in ALIASES.items() if name == key]
        if not any(name in values for name in names):
            problems.append(f"key {key!r} is missing: KataGo's analysis engine cannot start without it")
    targets = [key for key in _LOG_TARGETS if key in values]
    if len(targets) > 1:
        problems.append(f"keys {' and '.join(map(repr, targets))}: KataGo refuses more than one log target")
    return problems
